"""A right solution whose atexit handler ends the process with status 3 after the checks."""

import atexit
import os

import jax

atexit.register(os._exit, 3)


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        y = jax.numpy.maximum(x @ w1, 0.0)
        return jax.numpy.sum(jax.numpy.square(y @ w2))

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
