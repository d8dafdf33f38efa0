"""The residual listings that tests/reference/test_policies.py and test_offload_policies.py share:
what a policy keeps on the reference page's common model."""

from __future__ import annotations

from examples.reference import policies

ARGS = policies.model_inputs()


def computed(policy):
    return policies.residuals(policy, *ARGS).excluding_arguments()


def describe(listing):
    return [r.describe() for r in listing]
