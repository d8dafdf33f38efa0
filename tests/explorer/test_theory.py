"""examples.explorer.theory: FLOPs counted agree with XLA's; recursive checkpointing's cost."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from examples import explorer as e
from examples.tools.models import SIZES, Config


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's FLOP counting convention")
def test_cost_analysis_agrees_with_counting_products_on_cpu():
    """XLA:CPU counts a scan's body once, and full remat recomputes all but the last product."""
    cfg = Config(layers=3, batch=2, seq=64, width=64, heads=2)
    got = {r.policy: r.flops for r in e.measure(cfg, [e.NO_REMAT, "nothing_saveable"], 1, False)}
    forward = sum(e.layer_flops(cfg).values())
    np.testing.assert_allclose(got[e.NO_REMAT], 3 * forward, rtol=0.1)
    textbook, refined = e.full_remat_flop_ratio(cfg)
    assert textbook == pytest.approx(4 / 3)
    assert refined < textbook
    assert got["nothing_saveable"] / got[e.NO_REMAT] == pytest.approx(refined, rel=0.03)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's FLOP counting convention")
def test_page_size_counts_one_layer_and_full_remat_costs_less_than_four_thirds():
    """The page's theory section, on the page's own size (small)."""
    cfg = SIZES["small"]
    got = e.measure(cfg, [e.NO_REMAT, "nothing_saveable"], time_steps=False)
    share = e.counted_share(cfg, got)
    assert 1.0 <= share.of_one_layer < 1.1  # elementwise work: small next to the products
    assert share.of_all_layers == pytest.approx(share.of_one_layer / cfg.layers)
    assert e.flop_ratio(got) < 4 / 3


def test_recursive_checkpointing_costs_about_half_a_forward_pass_per_level():
    from examples.tutorial.recursive import recursive_sin_cos_formula

    levels = e.recursive_levels((4, 8, 16, 32, 64))
    added = [lv.added for lv in levels if lv.added is not None]
    assert len(added) == 4
    assert all(0.3 < a < 0.55 for a in added)  # half of one, not one
    assert added == sorted(added)  # approaching the limit 1/2 from below
    for lv in levels:
        assert lv.forward_passes == pytest.approx(recursive_sin_cos_formula(lv.depth) / lv.depth)
    assert [lv.residuals for lv in levels] == [lv.depth.bit_length() for lv in levels]


def test_the_committed_gpu_counts_hold_the_attention_products_not_only_elementwise_work():
    """The GPU runs' counts leave out the weight products (far below 3F of a layer) but are not
    elementwise work only: the H200's is about the two attention products of a forward pass, the
    H100's about twice that. And each offload's extra step time is its bytes at about 57 GB/s."""
    from examples.explorer.theory import attention_share, offload_link_rate

    gpu = {run.runinfo["device"]: run for run in e.load_all() if run.runinfo["backend"] == "gpu"}
    h200, h100 = gpu["NVIDIA H200"], gpu["NVIDIA H100 80GB HBM3"]
    for run in (h200, h100):
        assert not e.counted_share(run.config, run.results).counts_products
        rate = offload_link_rate(
            run.results, e.OFFLOAD_POLICIES[0], "save_only_these_names(mlp_hidden)"
        )
        assert rate is not None
        assert 50e9 < rate < 65e9, rate
    assert 1.0 < attention_share(h200.config, h200.results) < 1.15
    assert 2.0 < attention_share(h100.config, h100.results) < 2.3
