"""The value named "pre_activation" in both places: it works, but it is not the name the problem
asks for, and the checker looks for the value by that name.

expect: fail remat policy residuals
says: no value inside the checkpoint is named 'hidden'
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(x @ w1, "pre_activation")
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(
        pipeline, policy=jax.checkpoint_policies.save_only_these_names("pre_activation")
    )(w1, w2, x)
