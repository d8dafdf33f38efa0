"""The body checkpointed with policy=everything_saveable, meant as "keep what is needed": by
default it keeps every value of every layer, as if there were no checkpoint. (Under jax_remat3
on JAX 0.10.2, everything_saveable keeps only values named with checkpoint_name, so here it keeps
what the reference keeps; the policy is still not the one asked for.)

expect: fail policy residuals
expect under remat3 if everything_saveable keeps only names: fail policy
says: found everything_saveable
"""

import jax
import jax.numpy as jnp


def scan_remat_body(ws, bs, x):
    def layer(h, params):
        w, b = params
        return jnp.tanh(h @ w + b), None

    body = jax.checkpoint(layer, policy=jax.checkpoint_policies.everything_saveable)
    h, _ = jax.lax.scan(body, x, (ws, bs))
    return jnp.sum(h**2)
