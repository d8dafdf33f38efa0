"""examples.explorer.pitfalls: each measured pitfall behaves as docs/explorer/pitfalls.md says."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from examples.explorer import pitfalls as p
from examples.tools import models

P = jax.checkpoint_policies


# --- 1. vmap ------------------------------------------------------------------------------------


def test_vmap_with_shared_weights_keeps_the_product():
    alone, mapped = p.vmapped_stages(P.dots_with_no_batch_dims_saveable, shared_weights=True)
    (one,) = alone.excluding_arguments()
    (stages,) = mapped.excluding_arguments()
    assert one.primitive == stages.primitive == "dot_general"
    assert stages.shape == (4, *one.shape)  # one product over all stages, no batch dimension
    assert p.product_dimensions(shared_weights=True) == ((), ())


def test_vmap_with_per_stage_weights_drops_the_product():
    alone, mapped = p.vmapped_stages(P.dots_with_no_batch_dims_saveable, shared_weights=False)
    assert [r.primitive for r in alone.excluding_arguments()] == ["dot_general"]
    assert len(mapped.excluding_arguments()) == 0
    assert p.product_dimensions(shared_weights=False) == ((0,), (0,))  # the stage axis


@pytest.mark.parametrize("shared", [True, False])
def test_dots_saveable_keeps_the_vmapped_product_either_way(shared):
    _, mapped = p.vmapped_stages(P.dots_saveable, shared_weights=shared)
    assert [r.primitive for r in mapped.excluding_arguments()] == ["dot_general"]


def test_vmap_table_rows():
    table = p.vmap_table()
    assert table.column("vmapped, per-stage weights") == ["0 B", "256.0 KiB"]
    assert table.column("vmapped, shared weights") == ["256.0 KiB", "256.0 KiB"]


def test_the_network_is_the_shared_model():
    w, xs = p.stage_inputs(stages=3, batch=4, width=8)
    h = np.asarray(xs[0], np.float64)
    for wi in np.asarray(w, np.float64):
        h = np.tanh(h @ wi)
    got = p._three_stages(w, xs[0], "nowhere")
    np.testing.assert_allclose(got, np.mean(h**2), rtol=1e-5)
    assert p.tanh_layer is models.tanh_layer


# --- 2. placement ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def step():
    return {k: s for k, (_, s) in p.placement_costs(value_and_grad=True).items()}


def test_whole_function_checkpoint_costs_a_forward_pass_in_a_training_step(step):
    """JAX always lowers the second forward pass; whether the compiled step still runs it is
    XLA's decision on this release (the XLA of JAX 0.5.0 to 0.10.2 merges it with the first on
    the CPU, that of 0.12 keeps it), read from the compiled program in the same run."""
    products = p.placement_products(value_and_grad=True)
    (base_lowered, base_compiled), (lowered, compiled) = (
        products["nowhere"],
        products["whole function"],
    )
    assert lowered == base_lowered + 3  # one product per stage, recomputed
    assert compiled in (base_compiled, base_compiled + 3)
    if compiled > base_compiled:  # kept: the step pays for a second forward pass
        assert step["whole function"].flops > step["nowhere"].flops * 1.01
    else:  # merged: the compiled step is the one without a checkpoint
        assert step["whole function"].flops == pytest.approx(step["nowhere"].flops, rel=0.01)
    assert step["whole function"].temp_bytes >= step["nowhere"].temp_bytes
    assert step["last stage"].temp_bytes >= step["nowhere"].temp_bytes


def test_grad_alone_deletes_the_dead_forward_pass(step):
    grad_only = {k: s for k, (_, s) in p.placement_costs(value_and_grad=False).items()}
    assert grad_only["whole function"].flops == pytest.approx(grad_only["nowhere"].flops, rel=0.01)
    assert grad_only["whole function"].flops < step["whole function"].flops
    assert grad_only["whole function"].temp_bytes >= grad_only["nowhere"].temp_bytes
    # JAX removes the dead forward pass, not XLA: the lowered program has no extra product.
    products = p.placement_products(value_and_grad=False)
    assert products["whole function"][0] == products["nowhere"][0]


def test_residuals_kept_by_each_placement():
    kept = {
        k: listing.excluding_arguments().nbytes for k, (listing, _) in p.placement_costs().items()
    }
    assert kept["whole function"] == 0
    assert kept["last stage"] < kept["nowhere"]
    assert kept["first two stages"] < kept["last stage"]


def test_the_compiled_product_count_says_whether_xla_kept_the_recomputation(step):
    """JAX always lowers the recomputation (more products than without a checkpoint); whether
    the compiled program keeps it is XLA's decision on this release (0.10.2's CPU XLA removed it,
    0.12's keeps it), and the FLOPs and memory follow that decision, as the page says."""
    products = p.placement_products(value_and_grad=True)
    base_lowered, base_compiled = products["nowhere"]
    for where in ("last stage", "first two stages"):
        lowered, compiled = products[where]
        assert lowered > base_lowered
        assert compiled >= base_compiled
        if compiled == base_compiled:  # removed: the program is the one without a checkpoint
            assert step[where].flops == pytest.approx(step["nowhere"].flops, rel=0.01)
            assert step[where].temp_bytes == step["nowhere"].temp_bytes
        else:  # kept: the extra products are in the FLOPs
            assert step[where].flops > step["nowhere"].flops * 1.01


def test_placement_table_rows(step):
    costs = p.placement_costs()
    table = p.placement_table(costs)
    assert table.column("`jax.checkpoint` on") == list(p.PLACEMENTS)
    assert table.column("FLOPs vs. none")[0] == "1.00×"


# --- 3. policy=None -------------------------------------------------------------------------------


def test_policy_none_means_save_nothing():
    listings = p.none_versus_named_policies()
    describe = lambda k: [r.describe() for r in listings[k]]
    assert describe("policy=None") == describe("nothing_saveable")
    assert describe("policy=None") != describe("everything_saveable")
    assert len(listings["everything_saveable"].excluding_arguments()) > 0


# --- 4. scan --------------------------------------------------------------------------------------


def test_checkpoint_belongs_on_the_scanned_body():
    stats = p.scan_placement(depth=8, batch=16, width=64)
    body = stats["checkpoint on the scanned body"]
    plain = stats["no checkpoint"]
    around = stats["checkpoint around the scan"]
    assert body.temp_bytes < plain.temp_bytes
    assert around.temp_bytes >= plain.temp_bytes  # the whole-function mistake again
    assert body.flops > plain.flops
    assert p.scan_table(stats).column("variant") == list(stats)


def test_the_releases_that_kept_the_recomputation_are_read_from_the_records():
    def record(version, compiled):
        facts = {
            "straight_line": {
                "products_lowered": 30,
                "products_compiled": compiled,
                "products_without_checkpoint": 23,
                "temp_vs_plain": 1.0,
            }
        }
        return {"runinfo": {"jax": version}, "facts": facts}

    records = [
        record("0.5.0", 23),
        record("0.9.2", 23),
        record("0.11.2", 30),
        record("0.12.0.1", 30),
    ]
    assert p.recomputation_kept_by_release(records) == {
        True: "0.11.2–0.12.0.1",
        False: "0.5.0–0.9.2",
    }
    unmeasured = {"runinfo": {"jax": "0.4.0"}, "facts": {"straight_line": None}}
    assert p.recomputation_kept_by_release([unmeasured, *records[:1]]) == {
        True: "no release of the matrix",
        False: "0.5.0",
    }


def test_the_matrix_program_the_page_names_is_the_one_the_records_measure():
    # The page: a stack of DEPTH tanh(h @ w) layers, each checkpointed, compiled on each release
    # the matrix holds: the oldest release the package supports and the newest patch of each
    # minor release.
    import importlib.metadata
    import inspect
    import re

    from examples.reference import release_facts, releases

    source = inspect.getsource(release_facts.straight_line)
    assert "jnp.tanh(h @ w)" in source
    assert "jax.checkpoint(layer)" in source
    records = releases.load_all()
    products = {
        sl["products_without_checkpoint"] for r in records if (sl := r["facts"]["straight_line"])
    }
    assert products == {3 * release_facts.DEPTH - 1}  # forward DEPTH, backward 2 DEPTH - 1
    versions = [r["runinfo"]["jax"] for r in records]
    requires = importlib.metadata.requires("jax-remat-guide-examples") or []
    lower = next(re.search(r"jax>=([\d.]+)", q).group(1) for q in requires if q.startswith("jax>"))
    assert lower in versions
    minors = {tuple(v.split(".")[:2]) for v in versions}
    assert len(versions) == len(minors) + 1  # one minor release measured twice: the oldest
