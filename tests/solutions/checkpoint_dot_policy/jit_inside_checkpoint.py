"""The pipeline is a jitted function, and the checkpoint goes around it: right. What it keeps is
listed as outputs of the jitted function; the checker looks inside it, where they are the two
products the reference keeps.

expect: pass
"""

import jax
import jax.numpy as jnp


@jax.jit
def pipeline(w1, w2, x):
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)


def checkpoint_dot_policy(w1, w2, x):
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
