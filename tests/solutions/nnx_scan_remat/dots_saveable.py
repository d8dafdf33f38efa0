"""dots_saveable instead of dots_with_no_batch_dims_saveable: on these blocks (no batched
products) both keep the same values, but it is another policy, and on attention's batched
products it would keep more.

expect: fail policy
says: found dots_saveable
"""

import jax
from flax import nnx


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
    @nnx.remat(policy=jax.checkpoint_policies.dots_saveable)
    def step(x, block):
        return block(x)

    return step(x, blocks)
