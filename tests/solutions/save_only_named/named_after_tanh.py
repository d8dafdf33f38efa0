"""The name on the activation's output instead of the product: the same shape kept under the same
name, but another value, and the product is recomputed on the backward pass.

expect: fail residuals
says: names the output of tanh
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(jnp.tanh(x @ w1), "hidden")
        return jnp.sum((h @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=jax.checkpoint_policies.save_only_these_names("hidden"))(
        w1, w2, x
    )
