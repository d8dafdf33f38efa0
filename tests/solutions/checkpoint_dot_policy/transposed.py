"""Right, written transposed: the products are computed as w1.T @ x.T and w2.T @ h.T, so the
values the policy keeps are the reference's products in the other layout (f32[3,1] where the
reference keeps f32[1,3]). The same values, by primitive, dtype and size: it passes, and the
residuals line says a value was kept in another layout.

expect: pass
says: a value kept in another layout
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        hidden_t = jax.nn.relu(w1.T @ x.T)
        return jnp.sum((w2.T @ hidden_t) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
