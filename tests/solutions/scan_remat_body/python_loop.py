"""Each layer checkpointed, but applied with a Python loop instead of jax.lax.scan: the traced
program holds one copy of the layer per layer.

expect: fail remat policy residuals
says: no scan in the traced function
"""

import jax
import jax.numpy as jnp


@jax.checkpoint
def layer(h, w, b):
    return jnp.tanh(h @ w + b)


def scan_remat_body(ws, bs, x):
    h = x
    for i in range(ws.shape[0]):
        h = layer(h, ws[i], bs[i])
    return jnp.sum(h**2)
