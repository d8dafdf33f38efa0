"""Allocates 3 GiB, 128 MiB at a time, and touches every page (bounded, so that a checker that
failed to stop it would not take the machine down)."""

import numpy as np


def checkpoint_dot_policy(w1, w2, x):
    chunks = [np.ones(2**24) for _ in range(24)]
    return sum(float(c[0]) for c in chunks)
