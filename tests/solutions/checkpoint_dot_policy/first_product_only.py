"""Only the first layer is checkpointed: the second product sits outside. The policy is the right
one, and the policy line says so, on the checkpoint that is there; the remat line says what to
wrap, and the residuals line what the backward pass keeps instead.

expect: fail remat residuals
says: surrounds 1 of the 2 matrix products
"""

import jax
import jax.numpy as jnp

policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable


def checkpoint_dot_policy(w1, w2, x):
    hidden = jax.checkpoint(lambda w1, x: jax.nn.relu(x @ w1), policy=policy)(w1, x)
    return jnp.sum((hidden @ w2) ** 2)
