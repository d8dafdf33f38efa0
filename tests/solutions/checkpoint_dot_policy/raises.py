"""A helper raises: the error is shown at the learner's own line.

expect: fail runs
says: your code raised ValueError: this learner gave up at
"""

import jax


def helper(y):
    raise ValueError("this learner gave up")


def checkpoint_dot_policy(w1, w2, x):
    return jax.checkpoint(helper)(x @ w1)
