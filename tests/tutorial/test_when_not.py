"""When not to checkpoint: a lone Dense layer, and the whole differentiated function."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from examples.tutorial import compiled as J
from examples.tutorial import when_not as N

cpu_only = pytest.mark.skipif(
    jax.default_backend() != "cpu",
    reason="the page's XLA figures are measured on CPU; other backends compile differently",
)


def test_every_variant_computes_the_same_gradient():
    params, x = J.mlp_inputs(depth=3, batch=4, width=8)
    grads = [jax.grad(loss)(params, x) for loss in N.not_worth_it_variants().values()]
    for other in grads[1:]:
        for a, b in zip(jax.tree.leaves(grads[0]), jax.tree.leaves(other), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.fixture(scope="module")
def rows():
    return {r.name: r for r in N.not_worth_it_rows(depth=4, batch=64, width=128)}


def test_a_lone_dense_checkpoint_changes_nothing_traced(rows):
    plain, lone = rows["no checkpoint"], rows["each Dense on its own"]
    assert lone.residual_bytes == plain.residual_bytes
    assert lone.traced_peak_bytes == plain.traced_peak_bytes
    assert lone.grad.lowered_dots == plain.grad.lowered_dots  # nothing to recompute


@cpu_only
def test_a_lone_dense_checkpoint_changes_nothing_compiled(rows):
    plain, lone = rows["no checkpoint"], rows["each Dense on its own"]
    assert J.same_figures(lone.value_and_grad, plain.value_and_grad)
    facts = N.not_worth_it_facts(list(rows.values()))
    assert facts["lone_dense_verdict"] == "are those of the model without it, in every column"


def test_the_whole_function_keeps_nothing_but_peaks_as_high(rows):
    plain, whole = rows["no checkpoint"], rows["the whole loss"]
    assert whole.residual_bytes == 0
    assert plain.residual_bytes > 0
    # Not lower: equal on recent releases, higher on 0.5 (release records); the page glues
    # the relation it measured.
    assert whole.traced_peak_bytes >= plain.traced_peak_bytes
    # jax.grad alone: the first forward pass is unused and dropped before XLA sees it.
    assert whole.grad.lowered_dots == plain.grad.lowered_dots


@cpu_only
def test_the_whole_function_under_value_and_grad(rows):
    plain, whole = rows["no checkpoint"], rows["the whole loss"]
    nocse = rows["the whole loss, prevent_cse=False"]
    vg, base = whole.value_and_grad, plain.value_and_grad
    facts = N.not_worth_it_facts(list(rows.values()))
    assert vg.temp_bytes >= base.temp_bytes  # no memory saved
    # Without the barrier XLA merges the extra forward pass away.
    assert nocse.value_and_grad.compiled_dots == base.compiled_dots
    assert facts["whole_nocse_products"] == facts["plain_vg_products"]
    # Behind the barrier it is kept since 0.10, merged up to 0.9 (release records); the page's
    # sentence is glued from what this release did.
    if vg.compiled_dots > base.compiled_dots:
        assert vg.flops / base.flops > 1.2
        assert facts["whole_barrier_verdict"].startswith("the barrier is what keeps")
    else:
        assert vg.compiled_dots == base.compiled_dots
        assert facts["whole_barrier_verdict"].startswith("XLA merged the extra forward pass")
    assert facts["whole_peak_relation"] == N.relation(
        whole.traced_peak_bytes, plain.traced_peak_bytes, "traced peak"
    )
    assert facts["whole_grad_products"] == facts["plain_grad_products"]


def test_table_has_a_row_per_variant(rows):
    table = N.not_worth_it_table(list(rows.values()))
    assert table.column("checkpoint on") == list(N.not_worth_it_variants())
    assert table.column("FLOPs vs none")[0] == "1.00×"
