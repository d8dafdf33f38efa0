"""nnx.remat with the right policy, but around the block's first layer only, inside the scanned
block: the checkpoint sits in the scan's body yet surrounds one of its two products. The policy
line judges the policy that is there and points to the remat line.

expect: fail remat residuals
says: on the checkpoint that is there (it surrounds only part of what it should
"""

import jax
from flax import nnx

DOTS = jax.checkpoint_policies.dots_with_no_batch_dims_saveable


class Block(nnx.Module):
    def __init__(self, features, rngs):
        self.linear1 = nnx.Linear(features, 4 * features, rngs=rngs)
        self.linear2 = nnx.Linear(4 * features, features, rngs=rngs)

    def __call__(self, x):
        hidden = nnx.remat(lambda layer, x: layer(x), policy=DOTS)(self.linear1, x)
        return x + self.linear2(jax.nn.gelu(hidden))


def make_blocks(seed, features, layers):
    keys = jax.random.split(jax.random.key(seed), layers)
    return nnx.vmap(lambda key: Block(features, nnx.Rngs(key)))(keys)


def nnx_scan_remat(seed, x, features, layers):
    blocks = make_blocks(seed, features, layers)

    def step(x, block):
        return block(x)

    return nnx.scan(step, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)(x, blocks)
