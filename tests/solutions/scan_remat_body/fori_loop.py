"""A fori_loop whose whole body is checkpointed: right. fori_loop traces to a scan whose body
adds one to the loop counter outside the learner's function, and keeps the counters for the
backward pass; integer values carry no gradient, so neither counts against the placement or
the residuals.

expect: pass
says: integer indices
"""

import jax
import jax.numpy as jnp


def scan_remat_body(ws, bs, x):
    @jax.checkpoint
    def body(i, h):
        return jnp.tanh(h @ ws[i] + bs[i])

    h = jax.lax.fori_loop(0, ws.shape[0], body, x)
    return jnp.sum(h**2)
