"""The products and the ReLU under the checkpoint, the square and the sum outside it. The value
and the gradient are right, and the policy is the one asked for, but the problem asks for the
whole pipeline inside one checkpoint. Outside it, the square's derivative keeps 2·y (a `mul`)
where the reference keeps the second product (a `dot_general`).

expect: fail remat residuals
says: run outside it; the problem asks for the whole computation inside one jax.checkpoint
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def products(w1, w2, x):
        return jax.nn.relu(x @ w1) @ w2

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    y = jax.checkpoint(products, policy=policy)(w1, w2, x)
    return jnp.sum(y**2)
