"""The function has another name.

expect: fail load
says: defines no function named checkpoint_dot_policy (it defines: checkpoint_dots)
"""

import jax.numpy as jnp


def checkpoint_dots(w1, w2, x):
    return jnp.sum(x)
