"""The body checkpointed as the reference does; only the loss after the scan is written as a dot
product of the flattened state. The loss keeps other values (the flattened state, twice) than
the reference's h ** 2 does, but that code is outside the checkpoint, which the problem leaves
to the learner: right, and the residuals line says where the difference comes from.

expect: pass
says: comes from the code outside it
"""

import jax
import jax.numpy as jnp


def scan_remat_body(ws, bs, x):
    @jax.checkpoint
    def layer(h, wb):
        w, b = wb
        return jnp.tanh(h @ w + b), None

    h, _ = jax.lax.scan(layer, x, (ws, bs))
    return jnp.vdot(h, h)
