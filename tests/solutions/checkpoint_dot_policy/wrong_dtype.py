"""Returns float16 instead of the inputs' float32.

expect: fail dtype
says: expected float32 (the inputs' dtype), got float16
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    value = jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
    return value.astype(jnp.float16)
