import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    f = jax.checkpoint(lambda w1, w2, x: jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2, axis=0))
    return f(w1, w2, x)
