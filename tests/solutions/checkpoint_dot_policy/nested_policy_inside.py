"""Two nested checkpoints, the policy on the inner one only. JAX recomputes what the outer
one's policy (none) does not keep, whatever the inner one's says: nothing is kept. The policy
line judges the outer one and says why.

expect: fail policy residuals
says: judged on the outer of the nested checkpoints around the products: JAX recomputes what
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(jax.checkpoint(pipeline, policy=policy))(w1, w2, x)
