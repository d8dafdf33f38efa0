"""The scan's whole result returned, (carry, stacked outputs), where the problem asks for the
final activations alone: the shape line says what came back and where the tuple comes from.

expect: fail shape
says: returned a tuple of 2 values
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
        y = block(x)
        return y, y

    scanned = nnx.scan(
        nnx.remat(step, policy=policy), in_axes=(nnx.Carry, 0), out_axes=(nnx.Carry, 0)
    )
    return scanned(x, blocks)
