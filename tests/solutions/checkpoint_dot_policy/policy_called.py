"""The policy called, policy=dots_with_no_batch_dims_saveable(): it is already the policy (JAX
calls it, once per operation, with the operation), so calling it with nothing raises. JAX's
error is shown, and beside it what it means.

expect: fail runs
says: a checkpoint policy was called with no arguments
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable()
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
