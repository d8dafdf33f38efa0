"""The body checkpointed with prevent_cse=False, which JAX's documentation suggests inside a scan
(the scan already keeps XLA from merging the recomputation with the forward pass); the same
values are kept, so it passes.

expect: pass
"""

import functools

import jax
import jax.numpy as jnp


@functools.partial(jax.checkpoint, prevent_cse=False)
def layer(h, params):
    w, b = params
    return jnp.tanh(h @ w + b), None


def scan_remat_body(ws, bs, x):
    h, _ = jax.lax.scan(layer, x, (ws, bs))
    return jnp.sum(h**2)
