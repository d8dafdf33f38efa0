"""Shared fixtures, and the guard that keeps a GPU run from silently testing on the CPU.

JAX is imported only where it is needed, so that the browser tests (`nox -s browser`, whose
environment has Playwright and no JAX) can run with this file in place.
"""

from __future__ import annotations

import os

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    expected = os.environ.get("REMAT_GUIDE_EXPECT_BACKEND")
    if not expected:
        return
    import jax

    if jax.default_backend() != expected:
        pytest.exit(
            f"this run was asked to test on the {expected} backend "
            f"(REMAT_GUIDE_EXPECT_BACKEND={expected}), but JAX's default backend is "
            f"{jax.default_backend()!r} with devices {jax.devices()}; refusing to test on the "
            "wrong hardware",
            returncode=3,
        )


def pytest_report_header(config: pytest.Config) -> list[str]:
    try:
        from examples.runinfo import collect
    except ImportError as error:  # the browser session's environment has no JAX
        return [f"remat guide: JAX not importable here ({error})"]
    return [f"remat guide: {collect().one_line()}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any("gpu" in item.keywords for item in items):
        return
    import jax

    if jax.default_backend() == "gpu":
        return
    skip = pytest.mark.skip(
        reason=f"needs a CUDA GPU; JAX's default backend here is {jax.default_backend()!r}"
    )
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
