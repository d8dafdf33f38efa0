"""nnx.remat with graph_updates=False, which the NNX guide recommends under nnx.scan (it spares a
second copy of the weights), on the Flax releases that have the switch: right.

expect: pass
"""

import inspect

import jax
from flax import nnx


class Block(nnx.Module):
    def __init__(self, features, rngs):
        self.linear1 = nnx.Linear(features, 4 * features, rngs=rngs)
        self.linear2 = nnx.Linear(4 * features, features, rngs=rngs)

    def __call__(self, x):
        return x + self.linear2(jax.nn.gelu(self.linear1(x)))


#: Older Flax releases have no graph_updates: they get nnx.remat's defaults.
HAS_SWITCH = "graph_updates" in inspect.signature(nnx.remat).parameters
SWITCH = {"graph_updates": False} if HAS_SWITCH else {}


def nnx_scan_remat(seed, x, features, layers):
    @nnx.vmap(in_axes=0, out_axes=0)
    def create(key):
        return Block(features, rngs=nnx.Rngs(key))

    blocks = create(jax.random.split(jax.random.key(seed), layers))
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable

    def step(h, block):
        return block(h)

    body = nnx.remat(step, policy=policy, **SWITCH)
    scanned = nnx.scan(body, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    return scanned(x, blocks)
