"""examples.howto.diagnose: every finding fires on the mistake it names and stays silent on a
correct use, under both remat implementations where the installed JAX has both."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from examples.howto import diagnose as dg
from examples.tools import jaxprs, models
from examples.tools.residuals import saved_residuals

P = jax.checkpoint_policies
CFG = models.SIZES["tiny"]
OFFLOAD = {"offload_src": "device", "offload_dst": "pinned_host"}


@pytest.fixture(scope="module")
def model():
    return models.init_params(CFG), models.init_inputs(CFG)


def layer(h, p):
    return models.block(h, p, CFG.heads)


def scanned(policy):
    """The site's transformer loss, its scanned block checkpointed with ``policy``."""
    return models.scan_loss(jax.checkpoint(layer, policy=policy))


def one_layer(params):
    return jax.tree.map(lambda a: a[0], params)


# --- reading policies ----------------------------------------------------------------------------


def test_policy_names_are_read_from_every_names_policy():
    assert dg.policy_names(P.save_only_these_names("a", "b")) == {"a", "b"}
    assert dg.policy_names(P.save_any_names_but_these("c")) == {"c"}
    offload = P.save_and_offload_only_these_names(
        names_which_can_be_saved=["a"], names_which_can_be_offloaded=["b"], **OFFLOAD
    )
    assert dg.policy_names(offload) == {"a", "b"}
    empty = P.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=[], **OFFLOAD
    )
    assert dg.policy_names(empty) == frozenset()
    both = P.save_from_both_policies(P.save_only_these_names("a"), P.dots_saveable)
    assert dg.policy_names(both) == {"a"}
    for unnamed in (None, P.nothing_saveable, P.everything_saveable, P.dots_saveable):
        assert dg.policy_names(unnamed) is None


def test_policies_are_described_as_they_are_written():
    assert dg.describe_policy(None) == "None"
    assert dg.describe_policy(P.nothing_saveable) == "nothing_saveable"
    assert dg.describe_policy(P.dots_saveable) == "dots_saveable"  # not its alias checkpoint_dots
    assert (
        dg.describe_policy(P.save_only_these_names("b", "a")) == "save_only_these_names('a', 'b')"
    )
    both = P.save_from_both_policies(P.save_only_these_names("a"), P.dots_saveable)
    assert (
        dg.describe_policy(both)
        == "save_from_both_policies(save_only_these_names('a'), dots_saveable)"
    )
    offload = P.offload_dot_with_no_batch_dims("device", "pinned_host")
    assert dg.describe_policy(offload) == "offload_dot_with_no_batch_dims"
    assert dg.wants_unbatched_dots(offload)
    assert dg.wants_unbatched_dots(
        P.save_from_both_policies(P.nothing_saveable, P.dots_with_no_batch_dims_saveable)
    )
    assert not dg.wants_unbatched_dots(P.dots_saveable)


# --- unused-names and same-as-nothing ------------------------------------------------------------


def test_a_misspelt_name_is_reported_and_keeps_only_the_inputs(remat3, model):
    report = dg.diagnose(scanned(P.save_only_these_names("mlp_hiden")), *model)
    assert report.codes == ["unused-names", "same-as-nothing"]
    assert "'mlp_hiden'" in report.findings[0].message
    (checkpoint,) = report.checkpoints
    assert checkpoint.names == {"attn_logits", "mlp_hidden"}
    assert checkpoint.kept.excluding_arguments() == ()
    # The same figure asked of JAX directly, on the layer itself.
    h, p = model[1], one_layer(model[0])
    direct = saved_residuals(
        jax.checkpoint(layer, policy=P.save_only_these_names("mlp_hiden")), h, p
    )
    assert direct.excluding_arguments().nbytes == 0


def test_a_correct_name_gives_no_finding(remat3, model):
    report = dg.diagnose(scanned(P.save_only_these_names("mlp_hidden")), *model)
    assert report.findings == ()
    (checkpoint,) = report.checkpoints
    assert [r.name for r in checkpoint.kept.excluding_arguments()] == ["mlp_hidden"]
    h, p = model[1], one_layer(model[0])
    direct = saved_residuals(
        jax.checkpoint(layer, policy=P.save_only_these_names("mlp_hidden")), h, p
    )
    assert checkpoint.kept.excluding_arguments().nbytes == direct.excluding_arguments().nbytes > 0


def test_a_name_made_outside_the_checkpoint_is_said_to_be_outside(remat3):
    from jax.ad_checkpoint import checkpoint_name

    inner = jax.checkpoint(lambda h: jnp.sin(jnp.sin(h)), policy=P.save_only_these_names("x"))
    report = dg.diagnose(lambda h: jnp.sum(inner(checkpoint_name(h * 2, "x"))), jnp.ones(3))
    (finding,) = [f for f in report.findings if f.code == "unused-names"]
    assert "made outside it" in finding.message


def test_offloaded_names_are_checked_too(model):
    typo = P.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["atn_logits"], **OFFLOAD
    )
    assert "unused-names" in dg.diagnose(scanned(typo), *model).codes
    right = P.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["attn_logits"], **OFFLOAD
    )
    assert "unused-names" not in dg.diagnose(scanned(right), *model).codes


def test_nothing_saveable_itself_is_not_reported_as_saving_nothing(model):
    assert dg.diagnose(scanned(P.nothing_saveable), *model).findings == ()


@pytest.mark.skipif(not jaxprs.remat3_available(), reason="no jax_remat3 flag")
def test_under_remat3_a_plain_function_policy_gets_this_releases_answer(model):
    """jax 0.10 never asks a plain-function policy under jax_remat3 (full recompute); jax 0.12
    asks it about products and named values. The diagnostic says which, as detected."""
    asked = dg.remat3_asks_plain_policies()
    # The detection against JAX's own listing: a keep-everything function keeps something
    # exactly where the policy is asked at all.
    h, p = model[1], one_layer(model[0])
    with jaxprs.remat3():
        direct = saved_residuals(jax.checkpoint(layer, policy=lambda *_, **__: True), h, p)
    assert bool(asked) == bool(direct.excluding_arguments())
    policy = P.save_anything_except_these_names("attn_logits")  # a lambda returning True
    with jaxprs.remat3():
        report = dg.diagnose(scanned(policy), *model)
    (c,) = report.checkpoints
    if not asked:
        assert report.codes == ["same-as-nothing"]
        assert "plain function" in report.findings[0].message
        assert c.kept.excluding_arguments() == ()
    else:
        assert report.codes == ["remat3-plain-policy"]
        assert all(repr(name) in report.findings[0].message for name in asked)
        # It keeps what it is asked about and recomputes the rest.
        kept = c.kept.excluding_arguments()
        assert 0 < kept.nbytes < c.everything.excluding_arguments().nbytes
        assert {r.primitive or "name" for r in kept} <= asked | {"name"}


def test_without_remat3_a_plain_function_policy_gets_no_remat3_note(model):
    report = dg.diagnose(scanned(P.save_anything_except_these_names("attn_logits")), *model)
    assert "remat3-plain-policy" not in report.codes


# --- same-as-everything --------------------------------------------------------------------------


def test_everything_saveable_keeps_what_no_checkpoint_keeps(model):
    h, p = model[1], one_layer(model[0])
    keeps_all = saved_residuals(jax.checkpoint(layer, policy=P.everything_saveable), h, p)
    plain = saved_residuals(layer, h, p)
    # Arrays alike; the plain trace also keeps a few scalar literals, which the diagnostic ignores.
    arrays = lambda listing: sorted(r.type_str for r in listing if r.shape)
    assert arrays(keeps_all) == arrays(plain)
    assert {r.kind for r in plain if not r.shape} <= {"literal"}
    assert plain.nbytes - keeps_all.nbytes < 64


@pytest.mark.parametrize(
    "policy",
    [P.everything_saveable, P.save_anything_except_these_names("attn_logits")],
    ids=["everything_saveable", "save_anything_except_these_names"],
)
def test_a_policy_that_keeps_everything_is_reported(model, policy):
    report = dg.diagnose(scanned(policy), *model)
    assert report.codes == ["same-as-everything"]
    (checkpoint,) = report.checkpoints
    assert checkpoint.kept.nbytes == checkpoint.everything.nbytes > checkpoint.nothing.nbytes


def test_a_policy_between_the_two_is_not_reported(remat3, model):
    report = dg.diagnose(scanned(P.dots_with_no_batch_dims_saveable), *model)
    assert report.findings == ()
    (c,) = report.checkpoints
    assert c.nothing.nbytes < c.kept.nbytes < c.everything.nbytes


# --- no-unbatched-dots ---------------------------------------------------------------------------


def _stages(shared: bool):
    weights, x = models.stacked_tanh(depth=3, batch=8, width=16)
    xs = jnp.stack([x, x + 1, x - 1])
    stage = jax.checkpoint(models.tanh_layer, policy=P.dots_with_no_batch_dims_saveable)
    if shared:  # one weight for every stage: the product keeps no batch dimension
        return (lambda w, xs: jnp.sum(jax.vmap(stage, in_axes=(0, None))(xs, w[0]))), weights, xs
    return (lambda w, xs: jnp.sum(jax.vmap(stage)(xs, w))), weights, xs


def test_a_vmap_over_stages_with_their_own_weights_leaves_no_unbatched_product(remat3):
    report = dg.diagnose(*_stages(shared=False))
    assert report.codes == ["no-unbatched-dots", "same-as-nothing"]
    assert "MaxText PR 971" in report.findings[0].message
    (c,) = report.checkpoints
    assert (c.products, c.unbatched_products) == (1, 0)


def test_a_vmap_with_shared_weights_still_keeps_the_product(remat3):
    report = dg.diagnose(*_stages(shared=True))
    assert report.findings == ()
    (c,) = report.checkpoints
    assert [r.primitive for r in c.kept.excluding_arguments()] == ["dot_general"]


def test_a_function_without_products_is_reported_for_a_dots_policy():
    report = dg.diagnose(jnp.sin, jnp.ones(3), policy=P.dots_with_no_batch_dims_saveable)
    assert report.codes[0] == "no-unbatched-dots"
    assert "no matrix product" in report.findings[0].message


# --- policy-none ---------------------------------------------------------------------------------


def test_policy_none_is_named_full_recompute(remat3, model):
    for report in (
        dg.diagnose(scanned(None), *model),
        dg.diagnose(layer, model[1], one_layer(model[0]), policy=None),
    ):
        assert report.codes == ["policy-none"]
        assert "full recompute" in report.findings[0].message
        (c,) = report.checkpoints
        assert c.kept.excluding_arguments() == ()


def test_a_declared_nothing_saveable_is_not_taken_for_none(remat3, model):
    report = dg.diagnose(layer, model[1], one_layer(model[0]), policy=P.nothing_saveable)
    assert report.findings == ()


# --- whole-function and no-checkpoint ------------------------------------------------------------


@pytest.mark.parametrize("jit", [False, True], ids=["plain", "under jit"])
def test_a_checkpoint_around_the_whole_loss_is_reported(remat3, model, jit):
    whole = jax.checkpoint(models.scan_loss(layer), policy=P.dots_with_no_batch_dims_saveable)
    report = dg.diagnose(jax.jit(whole) if jit else whole, *model)
    assert report.codes == ["whole-function"]


def test_checkpointing_the_scanned_block_is_not_the_whole_function(remat3, model):
    assert "whole-function" not in dg.diagnose(scanned(P.nothing_saveable), *model).codes


def test_a_layer_checked_with_a_policy_is_not_the_whole_function(remat3, model):
    report = dg.diagnose(layer, model[1], one_layer(model[0]), policy=P.dots_saveable)
    assert "whole-function" not in report.codes


def test_no_checkpoint_is_a_note_and_a_checkpoint_silences_it(model):
    assert dg.diagnose(models.scan_loss(layer), *model).codes == ["no-checkpoint"]
    assert "no-checkpoint" not in dg.diagnose(scanned(P.nothing_saveable), *model).codes


# --- the report, and mistakes in calling it ------------------------------------------------------


def test_identical_checkpoints_are_counted_once():
    stage = jax.checkpoint(models.tanh_layer, policy=P.dots_saveable)
    weights, x = models.stacked_tanh(depth=3, batch=8, width=16)

    def loss(w, h):
        for i in range(3):
            h = stage(h, w[i])
        return jnp.sum(h)

    report = dg.diagnose(loss, weights, x)
    (c,) = report.checkpoints
    assert c.count == 3
    assert "1 (×3)" in report.table().to_markdown()


def test_the_report_prints_and_renders(model):
    report = dg.diagnose(scanned(P.save_only_these_names("mlp_hiden")), *model)
    text, markdown = str(report), report._repr_markdown_()
    for code in ("unused-names", "same-as-nothing"):
        assert code in text
        assert code in markdown
    assert "save_only_these_names('mlp_hiden')" in text
    assert markdown.count("\n|") >= 2  # a Markdown table
    assert report.warnings == report.findings
    assert report.implementation == "remat2"


def test_a_gradient_passed_by_mistake_is_refused():
    stage = jax.checkpoint(models.tanh_layer)
    weights, x = models.stacked_tanh(depth=1, batch=4, width=8)
    with pytest.raises(ValueError, match=r"pass the loss, not jax\.grad"):
        dg.diagnose(jax.grad(lambda w, h: jnp.sum(stage(h, w[0]))), weights, x)


def test_a_checkpoint_jax_cannot_list_is_a_note_not_a_crash(monkeypatch, model):
    def refuse(*args, **kwargs):
        raise RuntimeError("no listing here")

    monkeypatch.setattr(dg, "saved_residuals", refuse)
    report = dg.diagnose(scanned(P.nothing_saveable), *model)
    assert report.codes == ["not-compared"]
    assert "no listing here" in report.findings[0].message
    assert "n/a" in report.table().to_text()
