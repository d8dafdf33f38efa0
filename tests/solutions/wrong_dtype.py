import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    value = jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
    return value.astype(jnp.float16)
