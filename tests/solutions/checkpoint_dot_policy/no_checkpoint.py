"""Right value, no checkpoint at all: what a value-only grader accepts.

expect: fail remat policy residuals
says: no checkpoint in the traced function
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
