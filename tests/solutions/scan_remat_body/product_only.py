"""Only the matrix product is checkpointed, inside the scan: the tanh after it is outside the
checkpoint, so the backward pass keeps its output for every layer as well as the carry. The
remat line names what runs outside the checkpoint in the scan's body.

expect: fail remat residuals
says: add, tanh run outside it in the body
"""

import jax
import jax.numpy as jnp


def scan_remat_body(ws, bs, x):
    def layer(h, params):
        w, b = params
        z = jax.checkpoint(lambda h, w: h @ w)(h, w)
        return jnp.tanh(z + b), None

    h, _ = jax.lax.scan(layer, x, (ws, bs))
    return jnp.sum(h**2)
