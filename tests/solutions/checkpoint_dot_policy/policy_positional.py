"""The policy given by position, jax.checkpoint(pipeline, policy): jax.checkpoint takes one
positional argument, the function; everything else by keyword.

expect: fail runs
says: pass the policy by keyword
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy)(w1, w2, x)
