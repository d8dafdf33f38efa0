"""Two values named, only "hidden" kept: an extra name costs nothing, since the policy does not
keep it.

expect: pass
"""

import functools

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


@functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
def pipeline(w1, w2, x):
    h = checkpoint_name(x @ w1, "hidden")
    y = checkpoint_name(jnp.tanh(h) @ w2, "output")
    return jnp.sum(y**2)


def save_only_named(w1, w2, x):
    return pipeline(w1, w2, x)
