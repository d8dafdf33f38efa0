"""jax.checkpoint given the pipeline's value instead of the pipeline: JAX accepts it and returns
a function, which is what the learner's function then returns.

expect: fail shape
says: returned a function
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline(w1, w2, x), policy=policy)
