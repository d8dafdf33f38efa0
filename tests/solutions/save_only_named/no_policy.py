"""The value is named, but the checkpoint has no policy: the name alone keeps nothing.

expect: fail policy residuals
says: found no policy
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=None)(w1, w2, x)
