"""Helpers several test files of tests/problems/ use: the policies, a float64 comparison, and
the values a function keeps for its gradient."""

from __future__ import annotations

import jax
import numpy as np

from examples.tools.residuals import saved_residuals

P = jax.checkpoint_policies
DOTS = P.dots_with_no_batch_dims_saveable
NOTHING = P.nothing_saveable


def _close(actual, expected, rtol=1e-4, atol=1e-6):
    actual = np.asarray(actual, np.float64)
    scale = np.max(np.abs(expected), initial=0.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol + rtol * scale)


def _computed(fn, *args):
    return sorted(
        (r.primitive, r.type_str) for r in saved_residuals(fn, *args).excluding_arguments()
    )
