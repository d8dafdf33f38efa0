"""A plain jax.checkpoint inside the one with the policy. JAX applies the outer one's policy, so
both products are kept, as the reference keeps them; the problem counts the outer checkpoint as
"the one jax.checkpoint", and the remat line notes the extra level. (Under jax 0.10.2's
jax_remat3 the inner checkpoint's values reach no policy, so nothing is kept, and the residuals
check says so.)

expect: pass
says: a checkpoint is nested inside another, one level is enough
expect under remat3 if a nested checkpoint's values reach no policy: fail residuals
says under remat3 if a nested checkpoint's values reach no policy: does not keep
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(jax.checkpoint(pipeline), policy=policy)(w1, w2, x)
