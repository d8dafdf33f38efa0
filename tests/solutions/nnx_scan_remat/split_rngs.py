"""The blocks made the way Flax's "scan over layers" guide makes them, nnx.split_rngs over
nnx.Rngs(seed), rather than as the problem says: the structure is right, but the parameters (and
so the value) are not the ones the problem specifies.

expect: fail value gradient
says: nnx.split_rngs over one Rngs gives blocks of the same shapes but other values
"""

import jax
from flax import nnx


class Block(nnx.Module):
    def __init__(self, features, rngs):
        self.linear1 = nnx.Linear(features, 4 * features, rngs=rngs)
        self.linear2 = nnx.Linear(4 * features, features, rngs=rngs)

    def __call__(self, x):
        return x + self.linear2(jax.nn.gelu(self.linear1(x)))


def nnx_scan_remat(seed, x, features, layers):
    @nnx.split_rngs(splits=layers)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def create(rngs):
        return Block(features, rngs)

    blocks = create(nnx.Rngs(seed))

    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    @nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def step(x, block):
        return block(x)

    return step(x, blocks)
