"""Each block checkpointed with the right policy, but the blocks applied in a Python loop: the
trace holds one copy of the block per layer and no scan. The checker points to nnx.scan.

expect: fail remat policy residuals
says: apply the layers with nnx.scan
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


def nnx_scan_remat(seed, x, features, layers):
    keys = jax.random.split(jax.random.key(seed), layers)
    step = nnx.remat(lambda block, x: block(x), policy=DOTS)
    for key in keys:
        x = step(Block(features, nnx.Rngs(key)), x)
    return x
