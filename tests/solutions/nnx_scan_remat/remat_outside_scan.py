"""The decorators in the wrong order: nnx.remat above nnx.scan checkpoints the whole scan, so the
backward pass recomputes every block at once and holds all their values together. Between the
passes, JAX's default implementation lets the policy reach into the scan and keep arrays of the
shapes the reference keeps, computed by the scan of the checkpoint instead of the reference's:
the residuals line fails and points to the remat line (the difference is where the checkpoint
is). Under jax_remat3 the policy keeps exactly the reference's values on some releases (0.12),
other values on others (0.10.2 also keeps a bias).

expect: fail remat policy residuals
expect under remat3 if a policy around a scan keeps the reference's values: fail remat policy
says: surrounds the whole scan
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

    @nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    def step(x, block):
        return block(x)

    return step(x, blocks)
