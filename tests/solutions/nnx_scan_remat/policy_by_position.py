"""The policy passed by position, @nnx.remat(DOTS): nnx.remat takes it for an argument to bind,
and JAX fails on a function where it expected an array. The runs line says what it likely is.

expect: fail runs
says: is a policy given by position? Pass it by keyword, policy=...
"""

import jax
from flax import nnx

DOTS = jax.checkpoint_policies.dots_with_no_batch_dims_saveable


class Block(nnx.Module):
    def __init__(self, features, rngs):
        self.linear1 = nnx.Linear(features, 4 * features, rngs=rngs)
        self.linear2 = nnx.Linear(4 * features, features, rngs=rngs)

    def __call__(self, x):
        return x + self.linear2(jax.nn.gelu(self.linear1(x)))


def make_blocks(seed, features, layers):
    keys = jax.random.split(jax.random.key(seed), layers)
    return nnx.vmap(lambda key: Block(features, nnx.Rngs(key)))(keys)


def nnx_scan_remat(seed, x, features, layers):
    blocks = make_blocks(seed, features, layers)

    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    @nnx.remat(DOTS)
    def step(x, block):
        return block(x)

    return step(x, blocks)
