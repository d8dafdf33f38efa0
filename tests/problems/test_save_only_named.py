"""examples.problems.save_only_named: every claim its page makes (its reference against NumPy
is tested with scan_remat_body's, in test_scan_remat_body.py)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from problems._helpers import DOTS, NOTHING, P

from examples.problems import checkpoint_dot_policy as dots_problem
from examples.problems import save_only_named as p6
from examples.tools.jaxprs import checkpoint_names
from examples.tools.residuals import saved_residuals

# --- the page -------------------------------------------------------------------------------------


def _one_layer():
    stacked, h = dots_problem.stacked_params("mlp_block", depth=1, batch=2, width=4)
    return h, jax.tree.map(lambda a: a[0], stacked)


def _kept(policy):
    h, p = _one_layer()
    listing = saved_residuals(jax.checkpoint(p6.named_mlp_block, policy=policy), h, p)
    return sorted((r.kind, r.detail, r.type_str) for r in listing.excluding_arguments())


def test_named_block_is_the_mlp_block_with_two_name_equations():
    h, p = _one_layer()
    jaxpr = jax.make_jaxpr(p6.named_mlp_block)(h, p)
    assert checkpoint_names(jaxpr) == {"normed": 1, "mlp_pre": 1}
    assert "name[name=mlp_pre]" in jaxpr.pretty_print(use_color=False)
    np.testing.assert_allclose(
        p6.named_mlp_block(h, p), dots_problem.mlp_block(h, p), rtol=1e-6, atol=1e-7
    )


def test_names_policies_keep_exactly_the_named_values():
    assert _kept(P.save_only_these_names("mlp_pre")) == [("named", "mlp_pre", "f32[2,16]")]
    assert _kept(P.save_only_these_names("normed", "mlp_pre")) == [
        ("named", "mlp_pre", "f32[2,16]"),
        ("named", "normed", "f32[2,4]"),
    ]
    # The dots policy keeps the first product only: the one the backward pass reads.
    assert _kept(DOTS) == [("output", "dot_general", "f32[2,16]")]
    assert _kept(P.save_any_names_but_these("mlp_pre")) == [("named", "normed", "f32[2,4]")]


def test_a_missing_name_or_a_tuple_of_names_keeps_what_nothing_saveable_keeps():
    h, p = _one_layer()
    nothing = saved_residuals(jax.checkpoint(p6.named_mlp_block, policy=NOTHING), h, p)
    for policy in (P.save_only_these_names("mlp-pre"), P.save_only_these_names(("normed", "x"))):
        assert saved_residuals(jax.checkpoint(p6.named_mlp_block, policy=policy), h, p) == nothing
    assert _kept(NOTHING) == []


def test_names_given_as_a_list_raise_type_error():
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        P.save_only_these_names(["normed", "mlp_pre"])


def test_names_change_nothing_without_a_checkpoint():
    h, p = _one_layer()
    named = saved_residuals(p6.named_mlp_block, h, p).excluding_arguments()
    unnamed = saved_residuals(dots_problem.mlp_block, h, p).excluding_arguments()
    assert sorted(r.type_str for r in named) == sorted(r.type_str for r in unnamed)


def test_keeping_the_named_product_matches_dots_and_adding_normed_costs_memory():
    stacked, x = dots_problem.stacked_params("mlp_block", depth=4, batch=32, width=32)
    block = p6.named_mlp_block
    costs = dots_problem.gradient_costs(
        {
            "none": block,
            "nothing": jax.checkpoint(block, policy=NOTHING),
            "dots": jax.checkpoint(block, policy=DOTS),
            "pre": jax.checkpoint(block, policy=P.save_only_these_names("mlp_pre")),
            "both": jax.checkpoint(block, policy=P.save_only_these_names("normed", "mlp_pre")),
        },
        stacked,
        x,
    )
    none, nothing, dots, pre, both = costs.values()
    assert pre.temp_bytes < 0.5 * none.temp_bytes
    assert abs(pre.temp_bytes - dots.temp_bytes) <= 0.02 * dots.temp_bytes
    assert abs(pre.flops - dots.flops) <= 0.02 * dots.flops
    assert both.temp_bytes > pre.temp_bytes
    assert both.flops <= 1.02 * pre.flops  # saves no FLOPs that count
    assert nothing.temp_bytes < pre.temp_bytes
    assert nothing.flops > 1.05 * pre.flops
