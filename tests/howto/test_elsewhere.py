"""examples.howto.elsewhere: MaxText's and Haliax's settings rebuilt as JAX policies, and what
the guide "The same ideas elsewhere" says they keep, on the installed JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.howto import elsewhere as el
from examples.howto.diagnose import diagnose, policy_names
from examples.reference.release_facts import except_names_refuses_its_name
from examples.tools import models

P = jax.checkpoint_policies
CFG = models.Config(layers=2, batch=2, seq=32, width=32, heads=4)


@pytest.fixture(scope="module")
def model():
    return models.init_params(CFG), models.init_inputs(CFG)


def test_the_named_block_computes_the_sites_block(model):
    params, x = model
    one = jax.tree.map(lambda w: w[0], params)
    np.testing.assert_array_equal(
        el.named_block(x, one, CFG.heads), models.block(x, one, CFG.heads)
    )
    grads = [
        jax.jit(jax.grad(lambda p, f=f: jnp.sum(f(x, p, CFG.heads) ** 2)))(one)
        for f in (el.named_block, models.block)
    ]
    for key in one:
        np.testing.assert_allclose(grads[0][key], grads[1][key], rtol=1e-6, atol=1e-7)


def test_each_preset_builds_the_policy_with_its_names():
    for preset in el.MAXTEXT_PRESETS.values():
        policy = preset.policy()
        if preset.full:
            assert policy is None
            continue
        assert policy_names(policy) == set(preset.saved) | set(preset.offloaded)
    minimal, with_context = (
        el.MAXTEXT_PRESETS["minimal"],
        el.MAXTEXT_PRESETS["minimal_with_context"],
    )
    assert set(with_context.saved) - set(minimal.saved) == {"context"}
    assert el.MAXTEXT_PRESETS["save_dot_except_mlp"].saved == (
        "query_proj",
        "value_proj",
        "key_proj",
        "qkv_proj",
        "out_proj",
    )
    assert (
        "names_which_can_be_offloaded=['query_proj'"
        in el.MAXTEXT_PRESETS["qkv_proj_offloaded"].jax_call()
    )


@pytest.fixture(scope="module")
def rows():
    return {r.preset.name: r for r in el.preset_rows(CFG)}


@pytest.mark.slow
def test_presets_keep_only_names_the_block_makes(rows):
    made = {"query_proj", "key_proj", "value_proj", "context", "out_proj", "mlpwi", "mlpwo"}
    for row in rows.values():
        wanted = set(row.preset.saved) | set(row.preset.offloaded)
        assert set(row.kept_names) <= wanted & made
    # The block's last product feeds only an addition, whose derivative needs no value: listed
    # by most presets, kept by none.
    assert "mlpwo" in rows["minimal"].preset.saved
    assert all("mlpwo" not in row.kept_names for row in rows.values())
    assert rows["minimal"].kept_names == (
        "key_proj",
        "mlpwi",
        "out_proj",
        "query_proj",
        "value_proj",
    )
    assert rows["full"].device_bytes == rows["full"].host_bytes == 0


@pytest.mark.slow
def test_offloading_presets_keep_the_same_values_on_the_host(rows):
    for offloaded, saved in (
        ("qkv_proj_offloaded", "save_qkv_proj"),
        ("minimal_offloaded", "minimal"),
    ):
        assert rows[offloaded].device_bytes == 0
        assert rows[offloaded].host_bytes == rows[saved].device_bytes > 0
        assert rows[offloaded].kept_names == rows[saved].kept_names


@pytest.mark.slow
def test_presets_keep_less_down_the_list(rows):
    kept = [rows[name].device_bytes + rows[name].host_bytes for name in el.MAXTEXT_PRESETS]
    on_device = [
        rows[n].device_bytes for n in el.MAXTEXT_PRESETS if not el.MAXTEXT_PRESETS[n].offloaded
    ]
    assert on_device == sorted(on_device, reverse=True)
    assert kept[-1] == 0
    assert rows["minimal"].temp_bytes > rows["full"].temp_bytes


@pytest.mark.slow
def test_the_table_has_a_row_per_preset(rows):
    table = el.preset_table(list(rows.values()))
    assert len(table.rows) == len(el.MAXTEXT_PRESETS)
    assert "`full`" in table.column("MaxText `remat_policy`")
    assert len(el.preset_policy_table().rows) == len(el.MAXTEXT_PRESETS)


def test_the_diagnostic_lists_the_layout_alternatives_the_block_does_not_make(model):
    policy = el.MAXTEXT_PRESETS["minimal"].policy()
    report = diagnose(models.scan_loss(jax.checkpoint(el.named_layer(CFG), policy=policy)), *model)
    assert report.codes == ["unused-names"]
    for name in ("'mlpwi_0'", "'mlpwi_1'", "'qkv_proj'"):
        assert name in report.findings[0].message
    # A misspelt name gets the same finding and the same advice: the check lists the names the
    # model never makes, and cannot tell a layout's alternative from a typo (the page says so).
    typo = P.save_only_these_names(*el.MAXTEXT_PRESETS["minimal"].saved, "out_porj")
    typo_report = diagnose(
        models.scan_loss(jax.checkpoint(el.named_layer(CFG), policy=typo)), *model
    )
    assert typo_report.codes == ["unused-names"]
    assert "'out_porj'" in typo_report.findings[0].message
    for message in (report.findings[0].message, typo_report.findings[0].message):
        assert "check the spelling" in message


def test_haliax_keep_internals_recompute_carries_keeps_everything(model):
    haliax_like = P.save_anything_except_these_names(el.HALIAX_CARRY)
    layer = jax.checkpoint(el.carry_named_layer(CFG), policy=haliax_like)
    report = diagnose(models.scan_loss(layer), *model)
    (checkpoint,) = report.checkpoints
    assert el.HALIAX_CARRY in checkpoint.names
    kept_carry = [r.name for r in checkpoint.kept if r.name == el.HALIAX_CARRY]
    # Asked directly, does this release's policy answer "do not save" for a named value? Up to
    # jax 0.9 it does; newer releases' body is `lambda *_, **__: True`, so it keeps everything.
    if except_names_refuses_its_name():
        assert "same-as-everything" not in report.codes
        assert kept_carry == []
    else:
        assert report.codes == ["same-as-everything"]
        assert kept_carry == [el.HALIAX_CARRY]


def test_everything_saveable_keeps_the_arrays_no_checkpoint_keeps():
    everything, plain = el.everything_vs_no_checkpoint(CFG)
    assert el.arrays(everything) == el.arrays(plain)
    assert everything.nbytes > 0


def test_a_recomputed_random_draw_is_the_forward_draw():
    """The page says a JAX random function is a pure function of its key, so a checkpoint's
    recompute draws the same numbers: the gradient through a random mask is the same with and
    without the checkpoint, and equals the mask itself."""
    key, x = jax.random.key(0), jnp.linspace(-1.0, 1.0, 64)

    def masked(x, key):
        return jnp.sum(x * jax.random.bernoulli(key, 0.5, x.shape))

    plain = jax.grad(masked)(x, key)
    remat = jax.grad(jax.checkpoint(masked))(x, key)
    np.testing.assert_array_equal(remat, plain)
    np.testing.assert_array_equal(plain, jax.random.bernoulli(key, 0.5, x.shape).astype(x.dtype))


def test_the_named_block_names_each_projection_after_what_it_is():
    """query_proj tags the queries, key_proj the keys, value_proj the values (as in MaxText)."""
    cfg = models.Config(layers=1, batch=1, seq=4, width=8, heads=2)
    params, x = models.init_params(cfg), models.init_inputs(cfg)
    one = {k: v[0] for k, v in params.items()}
    jaxpr = jax.make_jaxpr(lambda h: el.named_block(h, one, cfg.heads))(x).jaxpr
    names = {}
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "name":
            names[eqn.params["name"]] = eqn.invars[0]
    # Follow each named value back to the split: q, k, v are its outputs in that order.
    (split,) = [e for e in jaxpr.eqns if e.primitive.name == "split"]
    q, k, v = split.outvars
    assert names["query_proj"] is q
    assert names["key_proj"] is k
    assert names["value_proj"] is v


@pytest.mark.slow
def test_megatron_selective_keeps_the_products_and_recomputes_the_attention_core():
    cfg = models.Config(layers=2, batch=2, seq=16, width=32, heads=4)  # seq and width differ
    with pytest.raises(ValueError, match="other than the width"):
        el.selective_rows(CFG)
    rows = {r.label: r for r in el.selective_rows(cfg)}
    full = rows["full: nothing_saveable"]
    keep_all = rows["keep all: everything_saveable"]
    assert full.per_layer_bytes == 0
    assert not full.keeps_seq_by_seq
    assert keep_all.keeps_seq_by_seq
    selective = [rows[label] for label in el.MEGATRON_SELECTIVE]
    for row in selective:
        assert not row.keeps_seq_by_seq, row.label
        assert 0 < row.per_layer_bytes < keep_all.per_layer_bytes, row.label
        assert row.flops < full.flops, row.label  # the kept products are not recomputed
    # The three writings keep the same values on the MaxText-named block.
    assert len({row.per_layer_bytes for row in selective}) == 1
    # Megatron's own choice keeps more of the layer (norms, the MLP's activation) than they do,
    # still no sequence-by-sequence value, and so recomputes less than they do.
    core = rows[el.ALL_BUT_CORE]
    assert not core.keeps_seq_by_seq
    assert selective[0].per_layer_bytes < core.per_layer_bytes < keep_all.per_layer_bytes
    assert core.flops < selective[0].flops
    table = el.selective_table(list(rows.values()))
    assert table.column("FLOPs vs full")[0] == "1.00×"


def test_batchnorm_statistics_update_once_under_nn_remat():
    pytest.importorskip("flax.linen")
    got = el.batchnorm_running_means(momentum=0.5)
    # One update from zero: momentum * 0 + (1 - momentum) * the batch mean (two would give 0.75).
    once = 0.5 * np.asarray(got["batch"], np.float64).mean(axis=0)
    np.testing.assert_allclose(got["plain"], once, rtol=1e-6)
    np.testing.assert_allclose(got["nn.remat"], once, rtol=1e-6)
