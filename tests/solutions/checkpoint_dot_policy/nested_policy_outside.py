"""Two nested checkpoints, the policy on the outer one only: the checkpoint around the products
has no policy. The policy line says which of the two it judged.

expect: fail policy
expect under remat3 if it ignores function policies: fail policy residuals
says: judged on the inner of the nested checkpoints
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(jax.checkpoint(pipeline), policy=policy)(w1, w2, x)
