"""Returns NaN: the finite check stops the run there.

expect: fail finite
says: the output contains NaN
"""

import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    return jnp.sum(x) * jnp.nan
