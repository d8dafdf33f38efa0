"""The names given as one list: the policy cannot even be made (a list cannot go in a set).

expect: fail runs
says: take each name as its own argument: save_only_these_names('a', 'b'), not a list
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        h = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(h) @ w2) ** 2)

    return jax.checkpoint(
        pipeline, policy=jax.checkpoint_policies.save_only_these_names(["hidden"])
    )(w1, w2, x)
