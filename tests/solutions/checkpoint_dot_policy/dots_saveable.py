"""A checkpoint with the neighbouring policy, dots_saveable.

expect: fail policy
says: found dots_saveable
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=jax.checkpoint_policies.dots_saveable)(w1, w2, x)
