"""Right, but switches JAX to its next remat implementation (jax_remat3) when loaded."""

import jax
import jax.numpy as jnp

jax.config.update("jax_remat3", True)


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
