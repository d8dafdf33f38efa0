"""The policy's name in quotes instead of the policy object.

The forward pass never calls the policy, so the value comes out right; the gradient fails.
Under jax_remat3, the releases that call no policy but their own kind (JAX 0.10.2) do not
call it either, and recompute everything; JAX 0.12 calls it, and the gradient fails.

expect: fail gradient policy residuals
expect under remat3 if it ignores function policies: fail policy residuals
says: found the string 'dots_with_no_batch_dims_saveable'; a policy is an object
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy="dots_with_no_batch_dims_saveable")(w1, w2, x)
