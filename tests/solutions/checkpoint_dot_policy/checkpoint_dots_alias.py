"""The older name checkpoint_dots, as MaxText's presets spell it: it is dots_saveable, the
neighbouring policy, under another name. The line names both.

expect: fail policy
says: found dots_saveable (also called checkpoint_dots: the same object); the problem asks for
"""

import jax
import jax.numpy as jnp


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    return jax.checkpoint(pipeline, policy=jax.checkpoint_policies.checkpoint_dots)(w1, w2, x)
