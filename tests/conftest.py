"""Shared fixtures, and the guard that keeps a GPU run from silently testing on the CPU."""

from __future__ import annotations

import os

import jax
import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    expected = os.environ.get("REMAT_GUIDE_EXPECT_BACKEND")
    if expected and jax.default_backend() != expected:
        pytest.exit(
            f"this run was asked to test on the {expected} backend "
            f"(REMAT_GUIDE_EXPECT_BACKEND={expected}), but JAX's default backend is "
            f"{jax.default_backend()!r} with devices {jax.devices()}; refusing to test on the "
            "wrong hardware",
            returncode=3,
        )


def pytest_report_header(config: pytest.Config) -> list[str]:
    from examples.runinfo import collect

    return [f"remat guide: {collect().one_line()}"]


def _on_gpu() -> bool:
    return jax.default_backend() == "gpu"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _on_gpu():
        return
    skip = pytest.mark.skip(
        reason=f"needs a CUDA GPU; JAX's default backend here is {jax.default_backend()!r}"
    )
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
