"""A right solution that, while loading, removes the folder its stdout is written to (the
checker's temporary folder)."""

import os
import shutil

import jax

shutil.rmtree(os.path.dirname(os.readlink("/proc/self/fd/1")))


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        y = jax.numpy.maximum(x @ w1, 0.0)
        return jax.numpy.sum(jax.numpy.square(y @ w2))

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
