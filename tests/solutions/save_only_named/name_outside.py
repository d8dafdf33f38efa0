"""The value named before the checkpoint, which then surrounds only the second product. Between
the passes the same array is kept (it is the checkpoint's input), but the first product is
outside the checkpoint, and the policy never sees the name it was given to keep. The policy
itself is the one asked for, so only the remat line fails, and names the mistake.

expect: fail remat
says: the value named 'hidden' is named outside the checkpoint, where its policy cannot see it
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name


def save_only_named(w1, w2, x):
    h = checkpoint_name(x @ w1, "hidden")
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    return jax.checkpoint(lambda h, w2: jnp.sum((jnp.tanh(h) @ w2) ** 2), policy=policy)(h, w2)
