"""What the reference tests share: the residual listings of test_policies.py and
test_offload_policies.py (what a policy keeps on the reference page's common model), and a made-up
series of release records for test_release_table.py and test_release_runs.py."""

from __future__ import annotations

import copy

from examples.reference import policies

ARGS = policies.model_inputs()


def computed(policy):
    return policies.residuals(policy, *ARGS).excluding_arguments()


def describe(listing):
    return [r.describe() for r in listing]


def series(record, values):
    """Copies of a release ``record``, one per ``(version, (fact, value))``: a made-up series of
    releases for the release-table tests."""
    out = []
    for version, (key, value) in values:
        data = copy.deepcopy(record)
        data["runinfo"]["jax"] = version
        data["facts"][key] = value
        out.append(data)
    return out
