"""The right value from a plain scan, with no checkpoint at all.

expect: fail remat policy residuals
says: no checkpoint in the traced function
"""

import jax
import jax.numpy as jnp


def scan_remat_body(ws, bs, x):
    def layer(h, params):
        w, b = params
        return jnp.tanh(h @ w + b), None

    h, _ = jax.lax.scan(layer, x, (ws, bs))
    return jnp.sum(h**2)
