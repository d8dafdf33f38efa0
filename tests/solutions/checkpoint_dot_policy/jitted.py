"""Correct, and jitted: the checker must look inside jit.

expect: pass
"""

from functools import partial

import jax
import jax.numpy as jnp


@jax.jit
@partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def checkpoint_dot_policy(w1, w2, x):
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
