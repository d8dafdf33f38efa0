"""The value is named "hidden", but the policy names "Hidden": names are compared exactly, no
value has that one, so the policy keeps nothing, silently.

expect: fail policy residuals
says: found save_only_these_names('Hidden')
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=jax.checkpoint_policies.save_only_these_names("Hidden"))(
        w1, w2, x
    )
