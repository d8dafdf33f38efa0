"""The policy is right, but no value is named: save_only_these_names("hidden") finds nothing to
keep.

expect: fail remat residuals
says: (it names no value)
"""

import jax
import jax.numpy as jnp


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = x @ w1
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=jax.checkpoint_policies.save_only_these_names("hidden"))(
        w1, w2, x
    )
