"""The policy given by position, nnx.remat(step, policy): nnx.remat takes one positional
argument, the function; the policy goes by keyword.

expect: fail runs
says: pass the policy by keyword
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
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable

    def step(x, block):
        return block(x)

    scanned = nnx.scan(nnx.remat(step, policy), in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    return scanned(x, blocks)
