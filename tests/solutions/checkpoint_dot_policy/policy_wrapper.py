"""The policy wrapped in a function of the learner's own. The default remat calls it and keeps
the products. Under jax_remat3, JAX 0.10.2 (for one) does not call a policy function at all and
recomputes everything, so the same file fails there; JAX 0.12 calls it, as remat2 does.

expect: pass
expect under remat3 if it ignores function policies: fail policy residuals
says under remat3 if it ignores function policies: JAX does not call a policy written as a function
"""

import jax
import jax.numpy as jnp


def keep_products(*args, **kwargs):
    return jax.checkpoint_policies.dots_with_no_batch_dims_saveable(*args, **kwargs)


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=keep_products)(w1, w2, x)
