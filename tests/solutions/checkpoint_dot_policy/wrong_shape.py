"""Sums over one axis only: a vector instead of a scalar.

expect: fail shape
says: expected shape () for N=1, d=3, got (3,)
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    f = jax.checkpoint(lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2, axis=0))
    return f(w1, w2, x)
