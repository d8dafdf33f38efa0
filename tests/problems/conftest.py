"""Fixtures for the tests of examples.problems: every test here runs with full float32 products."""

from __future__ import annotations

import jax
import pytest


@pytest.fixture(autouse=True)
def _full_float32_products():
    """A GPU's default TF32 products (or a TPU's bfloat16 passes) are not float32 references."""
    with jax.default_matmul_precision("highest"):
        yield
