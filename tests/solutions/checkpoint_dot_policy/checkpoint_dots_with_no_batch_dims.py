"""The problem's policy by its older name, checkpoint_dots_with_no_batch_dims: the same object.

expect: pass
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.checkpoint_dots_with_no_batch_dims
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
