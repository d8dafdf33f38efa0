"""The checkpointed pipeline is called, but its result is thrown away and the plain pipeline's is
returned. The traced program holds a checkpoint that nothing returned reads; the remat line must
say that it does nothing for the gradient, not pass it.

expect: fail remat policy residuals
says: what it computes is thrown away
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum(jnp.square(jnp.maximum(x @ w1, 0.0) @ w2))

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    jax.checkpoint(pipeline, policy=policy)(w1, w2, x)  # the result is dropped
    return pipeline(w1, w2, x)
