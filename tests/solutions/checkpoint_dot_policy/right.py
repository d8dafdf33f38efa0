"""A learner's correct solution to checkpoint_dot_policy, written from scratch.

expect: pass
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        y = jnp.maximum(x @ w1, 0.0)
        return jnp.sum(jnp.square(y @ w2))

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
