"""The products kept instead of the named value: dots_with_no_batch_dims_saveable also keeps the
second product, which the problem recomputes.

expect: fail policy residuals
says: found dots_with_no_batch_dims_saveable
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(
        pipeline, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    )(w1, w2, x)
