"""nnx.remat with prevent_cse=False on the step nnx.scan applies: inside a scan the CSE
protection is unnecessary, and the checker accepts it.

expect: pass
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

    scanned = nnx.scan(
        nnx.remat(step, policy=policy, prevent_cse=False),
        in_axes=(nnx.Carry, 0),
        out_axes=nnx.Carry,
    )
    return scanned(x, blocks)
