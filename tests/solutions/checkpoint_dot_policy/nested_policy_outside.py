"""Two nested checkpoints, the policy on the outer one only. JAX recomputes what the outer
one's policy does not keep, so the products are kept, as the reference keeps them: the policy
line judges the outer one, and the remat line notes the nesting. (Under jax_remat3 on the
release that ignores function policies, nothing is kept: the residuals line says so.)

expect: pass
says: on the outer of the nested checkpoints around the products, whose policy JAX applies
expect under remat3 if it ignores function policies: fail residuals
says under remat3 if it ignores function policies: does not keep
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(jax.checkpoint(pipeline), policy=policy)(w1, w2, x)
