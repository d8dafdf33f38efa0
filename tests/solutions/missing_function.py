import jax.numpy as jnp


def checkpoint_dots(w1, w2, x):
    return jnp.sum(x)
