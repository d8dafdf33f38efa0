"""examples.howto.fit_estimate: the roofline estimate, labelled as one, beside measured times."""

from __future__ import annotations

import pytest

from examples.explorer import data as explorer_data
from examples.howto import fit, fit_estimate

BY_KEY = {(r.target["name"], r.model["name"]): r for r in fit.load_all()}


def test_the_roofline_estimate_is_the_flops_over_the_published_peak():
    assert fit_estimate.roofline_seconds(989e12, "NVIDIA H100 80GB HBM3") == pytest.approx(1.0)
    assert fit_estimate.roofline_seconds(197e12, "TPU v5 lite") == pytest.approx(1.0)
    measured = explorer_data.load(explorer_data.RUNS / "nvidia-h100.json")
    table = fit_estimate.explorer_estimates(measured)
    assert table.caption.startswith("Estimate beside measurement")
    for row in table.rows:  # an estimate at peak is never slower than the run
        assert float(row[-1].rstrip("%")) < 100


def test_the_estimate_table_ends_with_the_least_work_that_fits():
    rec = BY_KEY[("h100-80gb x8", "8b")]
    line = fit_estimate.estimate_verdict_line(rec)
    fitting = [p for p in rec.plans if p.fits]
    least = min(fitting, key=lambda p: (fit.program_flops(rec.config, p.label), p.label))
    assert f"`{least.label}` asks for the least work" in line
    assert fit_estimate.estimate_table(rec).caption.startswith("Estimate, not a measurement")
