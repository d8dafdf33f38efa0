"""examples.explorer.run: compiled memory and FLOPs per policy, depth sweep, step times."""

from __future__ import annotations

import jax
import pytest
from explorer._helpers import TINY

from examples import explorer as e
from examples.tools.models import SIZES


def test_full_remat_costs_flops_and_saves_memory(results):
    plain, full = results[e.NO_REMAT], results["nothing_saveable"]
    assert full.flops > plain.flops
    assert full.temp_bytes < plain.temp_bytes


def test_depth_sweep_grows_without_remat_and_stays_flat_with_it(depth):
    temp = {(p.policy, p.layers): p.temp_bytes for p in depth}
    plain_growth = temp[(e.NO_REMAT, 4)] - temp[(e.NO_REMAT, 2)]
    remat_growth = temp[("nothing_saveable", 4)] - temp[("nothing_saveable", 2)]
    assert plain_growth > 0
    assert remat_growth < plain_growth


@pytest.mark.gpu
def test_gpu_memory_ordering_matches_the_cpu_ordering():
    """On a GPU, the compiled memory per policy is ordered as on the CPU."""
    cfg = SIZES["small"]
    names = [e.NO_REMAT, "dots_saveable", "dots_with_no_batch_dims_saveable", "nothing_saveable"]
    temp = {r.policy: r.temp_bytes for r in e.measure(cfg, names, time_steps=False)}
    assert temp[e.NO_REMAT] > temp["dots_saveable"] > temp["nothing_saveable"]
    assert temp["dots_with_no_batch_dims_saveable"] > temp["nothing_saveable"]


@pytest.mark.gpu
def test_offload_moves_bytes_to_the_host_on_gpu():
    cfg = SIZES["small"]
    kept, offloaded = "save_only_these_names(mlp_hidden)", e.OFFLOAD_POLICIES[0]
    got = {r.policy: r for r in e.measure(cfg, [kept, offloaded], time_steps=False)}
    assert got[offloaded].host_temp_bytes > 0
    assert got[offloaded].temp_bytes < got[kept].temp_bytes


def test_the_gelus_output_as_a_name_costs_memory_and_saves_no_flops():
    """The page: keeping mlp_hidden (the GELU's output) spares no recomputation, because the
    GELU's derivative needs its input, the product, which is then computed again."""
    cfg = SIZES["small"]
    rows = {
        r.policy: r
        for r in e.measure(
            cfg, ["save_only_these_names(mlp_hidden)", "nothing_saveable"], time_steps=False
        )
    }
    hidden, nothing = rows["save_only_these_names(mlp_hidden)"], rows["nothing_saveable"]
    assert hidden.residual_bytes_per_layer > nothing.residual_bytes_per_layer == 0
    assert hidden.temp_bytes > nothing.temp_bytes
    assert hidden.flops == pytest.approx(nothing.flops, rel=0.01)


def test_depth_growth_matches_kept_per_layer_and_the_block_input():
    cfg = SIZES["small"]
    names = [e.NO_REMAT, "nothing_saveable"]
    growth = e.growth_per_layer(e.depth_sweep(cfg, layers=(2, 4), policies=names))
    kept = e.layer_residuals(cfg, None).nbytes
    assert 0.9 < growth[e.NO_REMAT] / kept < 1.1  # "close"
    block_input = cfg.batch * cfg.seq * cfg.width * 4
    assert growth["nothing_saveable"] == pytest.approx(block_input, rel=0.05)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="describes the CPU backend")
def test_offload_policies_compile_like_their_on_device_twins_on_cpu():
    names = [
        *e.OFFLOAD_POLICIES,
        "save_only_these_names(mlp_hidden)",
        "dots_with_no_batch_dims_saveable",
    ]
    temp = {r.policy: r.temp_bytes for r in e.measure(SIZES["small"], names, time_steps=False)}
    assert temp[e.OFFLOAD_POLICIES[0]] == temp["save_only_these_names(mlp_hidden)"]
    assert temp[e.OFFLOAD_POLICIES[1]] == temp["dots_with_no_batch_dims_saveable"]


@pytest.mark.cpu_figures
def test_the_barrier_is_all_of_everything_saveables_excess_and_changes_no_flops(results):
    """The page's "The barrier inside the scan": with ``prevent_cse=False`` the scanned
    ``everything_saveable`` compiles to exactly no remat's memory; the barrier costs memory,
    never FLOPs (to the table's two decimals)."""
    costs = {c.policy: c for c in e.barrier_costs(TINY)}
    assert list(costs) == list(e.BARRIER_POLICIES)
    everything = costs["everything_saveable"]
    assert everything.temp_bytes_without == results[e.NO_REMAT].temp_bytes
    # the barrier's excess: on jax 0.12 a real one; jax 0.10.2's XLA compiles both to one plan
    assert everything.temp_bytes >= everything.temp_bytes_without
    for cost in costs.values():
        assert cost.temp_bytes_without <= cost.temp_bytes
        # XLA's count moves by a few FLOPs in a few hundred thousand on this tiny model (none on
        # the page's), the table's 1.00×
        assert cost.flops_without == pytest.approx(cost.flops, rel=1e-3)
    assert costs["nothing_saveable"].temp_bytes == results["nothing_saveable"].temp_bytes
    table = e.barrier_table(list(costs.values()), results[e.NO_REMAT].temp_bytes)
    assert len(table.rows) == len(costs) + 1
