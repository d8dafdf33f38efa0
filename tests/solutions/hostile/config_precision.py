"""Right, but lowers the default matrix-product precision every time it is called."""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    jax.config.update("jax_default_matmul_precision", "bfloat16")

    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
