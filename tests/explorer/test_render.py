"""examples.explorer.render: FLOPs heading, verdicts on step times, budget sentences, plots."""

from __future__ import annotations

import jax
import numpy as np
from explorer._helpers import DATA, TINY, _result

from examples import explorer as e
from examples.explorer.render import FLOPS, FLOPS_WITHOUT_PRODUCTS


def test_flops_column_is_marked_where_xla_leaves_out_the_products(results):
    gpus = [r for r in e.load_all(DATA) if r.runinfo["backend"] == "gpu"]
    assert gpus
    for gpu in gpus:  # XLA:GPU's count leaves out the cuBLAS products
        assert not e.counted_share(gpu.config, gpu.results).counts_products
        assert e.results_table(gpu.results, gpu.config).header[4] == FLOPS_WITHOUT_PRODUCTS
    if jax.default_backend() == "cpu":  # XLA:CPU counts the products (a loop body once)
        assert e.counted_share(TINY, list(results.values())).counts_products
        assert e.results_table(list(results.values()), TINY).header[4] == FLOPS


# --- verdicts: an ordering only where the ranges do not overlap ------------------------------


def test_timing_verdicts_claim_an_order_only_beyond_the_noise():
    results = [
        _result(e.NO_REMAT, 0.010, 0.009, 0.011),
        _result("a", 0.020, 0.015, 0.030),  # slower: 15 ms > 11 ms
        _result("b", 0.005, 0.004, 0.008),  # faster: 8 ms < 9 ms
        _result("c", 0.012, 0.0105, 0.013),  # overlaps
    ]
    assert e.timing_verdicts(results) == {"a": "slower", "b": "faster", "c": "within the noise"}
    sentence = e.ordering_sentence(results)
    assert "faster: `b`" in sentence
    assert "slower: `a`" in sentence
    assert "within the noise: 1 of 3" in sentence


def test_no_order_is_claimed_when_every_range_overlaps():
    results = [
        _result(e.NO_REMAT, 0.010, 0.008, 0.013),
        _result("a", 0.009, 0.0085, 0.012),
        _result("b", 0.012, 0.009, 0.014),
    ]
    sentence = e.ordering_sentence(results)
    assert "cannot tell their step times apart" in sentence
    assert "faster" not in sentence
    assert "slower" not in sentence


def test_budget_picks_a_policy_only_when_it_is_faster_than_every_other():
    results = [
        _result(e.NO_REMAT, 0.010, 0.009, 0.011, temp=100),
        _result("a", 0.020, 0.019, 0.021, temp=40),
        _result("b", 0.030, 0.029, 0.031, temp=30),
        _result("c", 0.0205, 0.0195, 0.022, temp=50),
    ]
    fits, fastest = e.render.under_budget(results, 45)
    assert [r.policy for r in fits] == ["a", "b"]
    assert fastest.policy == "a"
    assert "`a` is faster than each of the others" in e.budget_sentence(results, 45)
    fits, fastest = e.render.under_budget(results, 60)  # a and c overlap
    assert len(fits) == 3
    assert fastest is None
    assert "not by these step times" in e.budget_sentence(results, 60)
    assert e.budget_sentence(results, 35) == "Only `b` fits in 35 B."
    assert e.budget_sentence(results, 10) == "No measured policy fits in 10 B."


def test_tradeoff_error_bars_span_fastest_to_slowest_call_in_milliseconds():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.collections import LineCollection

    from examples.explorer.data import Result
    from examples.explorer.render import plot_tradeoff

    timed = Result("nothing_saveable", 1, 2**20, 0, None, 1.0, 0.004, 0.003, 0.0065, 7)
    fig = plot_tradeoff([("run", [timed])])
    (ax, *_) = fig.axes
    segments = [
        seg
        for coll in ax.collections
        if isinstance(coll, LineCollection)
        for seg in coll.get_segments()
    ]
    assert len(segments) == 1
    xs = segments[0][:, 0]
    np.testing.assert_allclose([xs.min(), xs.max()], [3.0, 6.5])  # ms: min and max of the calls
