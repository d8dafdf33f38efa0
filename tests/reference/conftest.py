"""Fixtures of tests/reference/: the facts of examples.reference.release_facts, measured once on the
installed JAX (test_release_facts.py, test_releases.py, test_release_table.py and
test_release_runs.py share them)."""

from __future__ import annotations

import copy

import pytest

from examples.reference import release_facts, releases


@pytest.fixture(scope="session")
def facts():
    return release_facts.collect_facts()


@pytest.fixture(scope="session")
def record(facts):
    return {
        "schema": releases.SCHEMA,
        "runinfo": {
            "jax": "0.7.2",
            "jaxlib": "0.7.2",
            "flax": "0.12.0",
            "python": "3.11.7",
            "backend": "cpu",
            "device": "cpu",
        },
        "facts": copy.deepcopy(facts),
        "machine": {"cpus": 2, "cpu": "some CPU", "load_15min": 1.5},
        "tests": {"passed": 3, "failed": [], "skipped": []},
        "seconds": {"tests": 10.0},
    }
