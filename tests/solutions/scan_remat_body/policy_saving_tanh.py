"""The body checkpointed with a hand-written policy that saves every tanh output. On a probe
function without tanh it keeps nothing, as the required keep-nothing policy does; on the
learner's own layer it keeps the tanh output. The policy line must judge it on the learner's
function, not pass it on the probe.

expect: fail policy residuals
says: but not on your checkpointed function
expect under remat3 if a function policy is not asked about tanh: pass
says under remat3 if a function policy is not asked about tanh: and on your checkpointed function
"""

import jax
import jax.numpy as jnp


def keep_tanh(prim, *_, **__):
    return prim.name == "tanh"


def scan_remat_body(ws, bs, x):
    def layer(h, wb):
        w, b = wb
        return jnp.tanh(h @ w + b), None

    h, _ = jax.lax.scan(jax.checkpoint(layer, policy=keep_tanh), x, (ws, bs))
    return jnp.sum(h**2)
