"""Right value, plain jax.checkpoint: the policy is missing.

expect: fail policy residuals
says: found no policy
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    return jax.checkpoint(pipeline)(w1, w2, x)
