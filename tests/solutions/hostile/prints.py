"""A right solution that prints as it goes: it passes, and its output is shown apart."""

import sys

import jax
import jax.numpy as jnp

print("loading my solution")


def checkpoint_dot_policy(w1, w2, x):
    print("shapes:", w1.shape, x.shape, file=sys.stderr)

    def pipeline(w1, w2, x):
        return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
