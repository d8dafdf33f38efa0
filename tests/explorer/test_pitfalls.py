"""examples.explorer.pitfalls: each measured pitfall behaves as docs/explorer/pitfalls.md says."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.explorer import pitfalls as p
from examples.tools import compat, models
from examples.tools.display import format_bytes

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


# --- 1b. expert weights in one einsum ------------------------------------------------------------


def test_the_expert_einsum_is_a_batched_product_over_the_experts():
    assert p.expert_dimensions() == ((0,), (0,))
    x, w = p.expert_inputs()
    x64, w64 = (np.asarray(a, np.float64) for a in (x, w))
    expected = np.tanh(np.einsum("etd,edf->etf", x64, w64))
    with jax.default_matmul_precision("highest"):
        np.testing.assert_allclose(p.expert_layer(x, w), expected, rtol=1e-5, atol=1e-6)


def test_the_no_batch_dims_policy_keeps_nothing_of_the_experts_and_the_name_keeps_the_product():
    listings = {k: v.excluding_arguments() for k, v in p.expert_residuals().items()}
    x, w = p.expert_inputs()
    product = (x.shape[0], x.shape[1], w.shape[2])
    assert len(listings["dots_with_no_batch_dims_saveable"]) == 0
    (dot,) = listings["dots_saveable"]
    assert (dot.primitive, dot.shape) == ("dot_general", product)
    (named,) = listings['save_only_these_names("expert_product")']
    assert (named.name, named.shape) == ("expert_product", product)
    table = p.expert_table(p.expert_residuals())
    assert table.column("bytes") == ["0 B", format_bytes(dot.nbytes), format_bytes(named.nbytes)]


def test_the_expert_gradient_does_not_depend_on_the_policy():
    x, w = p.expert_inputs(experts=2, tokens=4, width=8, hidden=16)
    loss = lambda x, w: jnp.sum(p.expert_layer(x, w) ** 2)
    plain = jax.grad(loss, argnums=1)(x, w)
    for policy in p.EXPERT_POLICIES.values():
        got = jax.grad(jax.checkpoint(loss, policy=policy), argnums=1)(x, w)
        np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-6)  # float32 rounding


# --- 2. placement ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def step():
    return {k: s for k, (_, s) in p.placement_costs(value_and_grad=True).items()}


def test_whole_function_checkpoint_costs_a_forward_pass_in_a_training_step(step):
    """JAX always lowers the second forward pass; whether the compiled step still runs it is
    XLA's decision on this release, read from the compiled program in the same run (measured
    on the CPU: jax 0.5.0's XLA merges it with the first; 0.10.2's, 0.11.2's and 0.12.0.1's keep
    it; the releases between were not run for this)."""
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


def test_what_the_page_says_of_the_whole_function_follows_xlas_decision():
    products = p.placement_products(value_and_grad=True)
    costs = p.placement_costs(value_and_grad=True)
    kept = p.recomputation_kept(products, "whole function")
    sentence = p.whole_function_outcome(products, costs)
    assert ("keeps the second forward pass" in sentence) is kept
    assert ("merges the second forward pass" in sentence) is not kept
    # The page's "Across releases" note, on the releases measured.
    if compat.jax_version() < (0, 5, 1):
        assert not kept, jax.__version__
    elif compat.jax_version() >= (0, 10):
        assert kept, jax.__version__


def test_the_memory_sentence_gives_size_and_cost():
    costs = p.placement_costs(value_and_grad=True)
    base = costs["nowhere"][1].temp_bytes
    for where in ("last stage", "first two stages"):
        temp = costs[where][1].temp_bytes
        ratio = costs[where][1].flops / costs["nowhere"][1].flops
        sentence = p.memory_against_none(costs, where)
        assert format_bytes(base) in sentence
        assert f"for {ratio:.2f} times the FLOPs" in sentence
        if temp < base:
            saved = f"{format_bytes(base - temp)} ({(base - temp) / base:.0%}) less"
            assert sentence.startswith(saved)
        elif temp == base:
            assert sentence.startswith("the same as")


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


# --- 3b. save_anything_except_these_names -------------------------------------------------------


def test_save_anything_except_these_names_keeps_the_value_and_save_any_names_but_these_drops_it():
    from examples.reference import release_facts

    listings = {k: v.excluding_arguments() for k, v in p.except_names_policies().items()}
    everything, except_, any_but = listings.values()
    stage = everything[[r.name for r in everything].index("stage0")]
    if release_facts.except_names_refuses_its_name():
        # Honoured (jax 0.5.0 to 0.9.2 in the release records): the name leaves the listing,
        # the same array stays under the operation that made it, at most one copy fewer.
        assert "stage0" not in [r.name for r in except_]
        assert everything.nbytes - except_.nbytes <= stage.nbytes
    else:  # ignored (0.10.2 on): the policy keeps everything
        assert [r.describe() for r in except_] == [r.describe() for r in everything]
    assert [(r.name, r.shape) for r in any_but] == [("stage1", stage.shape)]
    table = p.except_names_table(p.except_names_policies())
    assert table.column("bytes")[2] == format_bytes(stage.nbytes)


def test_the_named_stages_gradient_does_not_depend_on_the_policy():
    w, xs = p.stage_inputs(stages=3, batch=4, width=8)
    ws = tuple(w)
    h = np.asarray(xs[0], np.float64)
    for wi in np.asarray(w, np.float64):
        h = np.tanh(h @ wi)
    with jax.default_matmul_precision("highest"):
        np.testing.assert_allclose(p.named_stages(ws, xs[0]), np.mean(h**2), rtol=1e-5)
    plain = jax.grad(p.named_stages)(ws, xs[0])
    for policy in p.EXCEPT_POLICIES.values():
        got = jax.grad(jax.checkpoint(p.named_stages, policy=policy))(ws, xs[0])
        for a, b in zip(got, plain, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)  # float32 rounding


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
