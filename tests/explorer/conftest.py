"""Measurements several test files of examples.explorer read, computed once per session."""

from __future__ import annotations

import pytest
from explorer._helpers import TINY

from examples import explorer as e


@pytest.fixture(scope="session")
def results():
    """Three policies on the tiny model, compiled but not timed (the CLI test times two)."""
    names = [e.NO_REMAT, "dots_saveable", "nothing_saveable"]
    return {r.policy: r for r in e.measure(TINY, names, time_steps=False)}


@pytest.fixture(scope="session")
def depth():
    return e.depth_sweep(TINY, layers=(2, 4), policies=(e.NO_REMAT, "nothing_saveable"))
