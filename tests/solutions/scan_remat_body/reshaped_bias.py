"""The biases given another shape (bs[:, None, :]) before the scan: right. The backward pass
keeps the reshaped biases, which are the biases.

expect: pass
says: counted as the value it stands for
"""

import jax
import jax.numpy as jnp


def scan_remat_body(ws, bs, x):
    @jax.checkpoint
    def layer(h, params):
        w, b = params
        return jnp.tanh(h @ w + b), None

    h, _ = jax.lax.scan(layer, x, (ws, bs[:, None, :]))
    return jnp.sum(h**2)
