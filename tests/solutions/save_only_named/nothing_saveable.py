"""The value is named, but the policy is nothing_saveable: names only matter to a policy that
reads them. (Under jax_remat3, jax.checkpoint turns nothing_saveable into no policy at all on the
releases that do so, and the checker says so.)

expect: fail policy residuals
says: found nothing_saveable
says under remat3 if it turns nothing_saveable into no policy: found no policy
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=jax.checkpoint_policies.nothing_saveable)(w1, w2, x)
