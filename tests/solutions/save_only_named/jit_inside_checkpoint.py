"""The named pipeline is a jitted function inside the checkpoint: right. The checker looks inside
the jitted function, where the value kept is the one named 'hidden'.

expect: pass
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@jax.jit
def pipeline(w1, w2, x):
    h = checkpoint_name(x @ w1, "hidden")
    return jnp.sum((jnp.tanh(h) @ w2) ** 2)


def save_only_named(w1, w2, x):
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
