import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    return jnp.sum(x) * jnp.nan
