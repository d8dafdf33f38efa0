"""save_any_names_but_these("hidden"), read as "keep hidden": it keeps every named value except
hidden, which here is nothing.

expect: fail policy residuals
says: found save_any_names_but_these('hidden')
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(
        pipeline, policy=jax.checkpoint_policies.save_any_names_but_these("hidden")
    )(w1, w2, x)
