"""Right: the learner turns on jax_remat3 for its own checkpoint and puts the flag back (the
config line passes). The checkpoint is traced under remat3; the checker must list what it keeps
under that implementation too, not re-apply it under the default one, where the remat3 name
would not be seen and nothing would be kept.

expect: pass
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    def pipeline(w1, w2, x):
        hidden = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(hidden) @ w2) ** 2)

    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    checkpointed = jax.checkpoint(pipeline, policy=policy)
    if not hasattr(jax.config, "jax_remat3"):  # releases before 0.10
        return checkpointed(w1, w2, x)
    before = jax.config.jax_remat3
    jax.config.update("jax_remat3", True)
    try:
        return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
    finally:
        jax.config.update("jax_remat3", before)
