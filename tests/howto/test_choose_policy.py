"""examples.howto.choose_policy: the policy guide's measurements and the claims its page makes."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.howto import choose_policy as cp
from examples.tools import compat
from examples.tools.jaxprs import walk
from examples.tools.measure import CompiledStats, Timing
from examples.tools.models import Config
from examples.tools.models import named_block as block
from examples.tools.residuals import saved_residuals

SHORT = Config(layers=2, batch=1, seq=128, width=64, heads=1)
LONG = dataclasses.replace(SHORT, seq=512)
NAMES = 'save_only_these_names("qkv", "mlp_pre")'
DOTS_NB = "dots_with_no_batch_dims_saveable"


def _relative_error(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.mark.slow
def test_bfloat16_gradients_of_every_candidate_match_float64():
    params, x = cp.init(SHORT)
    with compat.enable_x64(True):
        as64 = lambda t: jax.tree.map(lambda a: jnp.asarray(np.asarray(a, np.float64)), t)
        reference = jax.grad(cp.make_loss(SHORT, cp.NO_REMAT))(as64(params), as64(x))
        reference = jax.tree.map(np.asarray, reference)
    plain = jax.jit(jax.grad(cp.make_loss(SHORT, cp.NO_REMAT)))(params, x)
    for label, policy in cp.CANDIDATES.items():
        grads = jax.jit(jax.grad(cp.make_loss(SHORT, policy)))(params, x)
        for key in reference:
            assert grads[key].dtype == jnp.bfloat16
            # bfloat16 has 8 bits of mantissa: a few per cent against float64 ...
            assert _relative_error(grads[key], reference[key]) < 0.05, (label, key)
            # ... and remat changes nothing against the same computation without it.
            assert _relative_error(grads[key], plain[key]) < 0.01, (label, key)


def test_dot_product_attention_traces_to_two_batched_products_the_first_in_float32():
    products = cp.attention_products(SHORT)
    assert len(products) == 2
    assert all(batched for _, batched in products)
    assert products[0][0].startswith("f32[")
    assert products[1][0].startswith("bf16[")


def test_jax_says_the_default_attention_falls_back_to_xla():
    doc = " ".join(inspect.getdoc(jax.nn.dot_product_attention).split())
    if "falls back to `xla`" not in doc:
        # Releases before 0.8 word it as a promise ("automatically select the best available
        # backend"); what the default does is checked below on every release.
        assert "automatically select the best available backend" in doc
    # The default traces to the very program `implementation="xla"` traces to.
    q = jnp.zeros((1, 128, 1, 64), cp.DTYPE)
    default = jax.make_jaxpr(lambda q: jax.nn.dot_product_attention(q, q, q))(q)
    xla = jax.make_jaxpr(lambda q: jax.nn.dot_product_attention(q, q, q, implementation="xla"))(q)
    assert str(default) == str(xla)


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="a GPU may have cuDNN")
def test_cudnn_attention_is_refused_without_cudnn():
    q = jnp.zeros((1, 128, 1, 64), cp.DTYPE)
    with pytest.raises(RuntimeError, match="cuDNN is not detected"):
        jax.nn.dot_product_attention(q, q, q, implementation="cudnn")


@pytest.fixture(scope="module")
def runs():
    return {"short": cp.measure(SHORT, timed=False), "long": cp.measure(LONG, timed=False)}


@pytest.mark.slow
def test_nothing_saveable_is_the_floor_and_the_named_policies_sit_between(runs):
    for m in runs.values():
        none, nothing = m[cp.NO_REMAT].stats, m["nothing_saveable"].stats
        assert m["nothing_saveable"].kept.nbytes == 0
        for label in (NAMES, DOTS_NB):
            assert nothing.temp_bytes < m[label].stats.temp_bytes < none.temp_bytes
            assert 0 < cp.trade(m, label).spared < 1


@pytest.mark.slow
def test_names_keep_exactly_the_two_products_and_less_than_the_dots_policy(runs):
    m = runs["short"]
    assert [r.name for r in m[NAMES].kept] == ["qkv", "mlp_pre"]
    assert m[NAMES].kept.nbytes < m[DOTS_NB].kept.nbytes
    # The dots policy keeps the output projection's product as well: three a layer, not the
    # last MLP product's output, which the backward pass does not read (the page says so).
    assert len(m[DOTS_NB].kept) == len(m[NAMES].kept) + 1
    assert len(m[DOTS_NB].kept) == 3  # `kept` is one layer's
    assert {r.detail for r in m[DOTS_NB].kept} == {"dot_general"}


@pytest.mark.slow
def test_named_policies_spare_a_smaller_share_at_the_long_sequence(runs):
    for label in (NAMES, DOTS_NB):
        assert cp.trade(runs["long"], label).spared < cp.trade(runs["short"], label).spared


@pytest.mark.slow
def test_dots_saveable_keeps_float32_sequence_squares_that_grow_with_the_sequence(runs):
    for tag, m in runs.items():
        seq = m["dots_saveable"].seq
        squares = [r for r in m["dots_saveable"].kept if list(r.shape).count(seq) >= 2]
        assert squares, tag
        assert all(r.dtype == np.float32 for r in squares), tag
        assert cp.square_share(m[NAMES], seq) == 0
        assert cp.square_share(m[DOTS_NB], seq) == 0
    short, long = runs["short"]["dots_saveable"], runs["long"]["dots_saveable"]
    assert cp.square_share(long, LONG.seq) > cp.square_share(short, SHORT.seq)
    assert cp.square_share(long, LONG.seq) > 0.5
    # It keeps every product the other two keep and the attention's as well, so it spares more
    # of the recomputation than either (how much, XLA's count says: it differs by release), and
    # gives memory back for it.
    dots = cp.trade(runs["long"], "dots_saveable").spared
    assert dots > max(cp.trade(runs["long"], label).spared for label in (NAMES, DOTS_NB))
    assert (
        cp.trade(runs["long"], "dots_saveable").extra_bytes
        > cp.trade(runs["long"], NAMES).extra_bytes
    )


def _product_flops(cfg, seq, mlp="gelu"):
    """FLOPs of one layer's forward products, from the traced block's dot_general equations:
    (those with batch dimensions, the attention's; those without, the weights')."""
    c = dataclasses.replace(cfg, seq=seq)
    params, x = cp.init(c, mlp)
    one_layer = jax.tree.map(lambda w: w[0], params)
    fn = cp.gated_block if mlp == "gated" else block
    layer = functools.partial(fn, heads=c.heads, attention="dot_product_attention")
    flops = {True: 0, False: 0}
    for eqn, _ in walk(jax.make_jaxpr(layer)(x, one_layer)):
        if eqn.primitive.name == "dot_general":
            ((contract, _), (batch, _)) = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            size = math.prod(lhs[i] for i in contract)
            flops[bool(batch)] += 2 * size * math.prod(eqn.outvars[0].aval.shape)
    return flops[True], flops[False]


def test_the_attention_outweighs_the_weight_products_from_the_crossover_on():
    # The page places SHORT and LONG by this length; counted here from the traced products.
    for cfg in (cp.SHORT, dataclasses.replace(cp.SHORT, width=64, heads=2, mlp_ratio=2)):
        at = cp.attention_crossover(cfg)
        attention, weights = _product_flops(cfg, at)
        assert attention == weights
        below, above = _product_flops(cfg, at // 2), _product_flops(cfg, 2 * at)
        assert below[0] < below[1]
        assert above[0] > above[1]
    assert cp.SHORT.seq < cp.attention_crossover(cp.SHORT) < cp.LONG.seq


def test_a_gated_mlp_moves_the_crossover_to_two_plus_one_and_a_half_r_widths():
    # Counted from the traced gated block's products, and by XLA from the compiled ones (the
    # page prints the latter).
    cfg = cp.SHORT
    at = cp.attention_crossover(cfg, "gated")
    assert at == (2 + 1.5 * cfg.mlp_ratio) * cfg.width
    assert at > cp.attention_crossover(cfg)
    attention, weights = _product_flops(cfg, at, "gated")
    assert attention == weights
    compiled = cp.product_flops(dataclasses.replace(cfg, seq=at), "gated")
    assert compiled["attention"] == pytest.approx(attention, rel=0.01)
    assert compiled["weights"] == pytest.approx(weights, rel=0.01)
    gelu = cp.product_flops(dataclasses.replace(cfg, seq=cp.attention_crossover(cfg)))
    assert gelu["attention"] == pytest.approx(gelu["weights"], rel=0.01)


GATED_NAMES = 'save_only_these_names("qkv", "mlp_gate", "mlp_up")'
_STATS = CompiledStats(0, 0, 0, None, 0.0, None)


@pytest.fixture(scope="module")
def gated_runs():
    return {
        "short": cp.measure(SHORT, timed=False, mlp="gated"),
        "long": cp.measure(LONG, timed=False, mlp="gated"),
    }


@pytest.mark.slow
def test_the_gated_block_keeps_what_each_policy_says_and_trades_memory_for_recomputation(
    gated_runs,
):
    m = gated_runs["short"]
    assert [r.name for r in m[GATED_NAMES].kept] == ["qkv", "mlp_gate", "mlp_up"]
    # the dots policy keeps the output projection besides: four products a layer
    assert len(m[DOTS_NB].kept) == 4
    assert {r.detail for r in m[DOTS_NB].kept} == {"dot_general"}
    for run in gated_runs.values():
        nothing, none = run["nothing_saveable"].stats, run[cp.NO_REMAT].stats
        for label in (GATED_NAMES, DOTS_NB):
            assert nothing.temp_bytes < run[label].stats.temp_bytes < none.temp_bytes
            assert 0 < cp.trade(run, label).spared < 1
    verdict = cp.gated_verdict(gated_runs, DOTS_NB, GATED_NAMES)
    assert verdict.count("tokens") == 2


def test_the_gated_blocks_gradients_are_the_same_with_and_without_remat():
    params, x = cp.init(SHORT, "gated")
    with compat.enable_x64(True):
        as64 = lambda t: jax.tree.map(lambda a: jnp.asarray(np.asarray(a, np.float64)), t)
        p64, x64 = as64(params), as64(x)
        plain = jax.grad(cp.make_loss(SHORT, cp.NO_REMAT, mlp="gated"))(p64, x64)
        for label, policy in cp.GATED_CANDIDATES.items():
            grads = jax.grad(cp.make_loss(SHORT, policy, mlp="gated"))(p64, x64)
            for key in plain:
                np.testing.assert_allclose(
                    grads[key], plain[key], rtol=1e-10, atol=1e-12, err_msg=label
                )


def test_the_gated_verdict_says_which_policy_wins_on_what():
    def measured(extra_dots, spared_dots, extra_names, spared_names):
        def row(label, temp, flops):
            stats = dataclasses.replace(_STATS, temp_bytes=temp, flops=flops)
            return cp.Measured(label, 256, stats, None, None)

        # nothing_saveable: 100 bytes, 200 FLOPs; no remat: 100 FLOPs of the plain step
        return {
            "nothing_saveable": row("nothing_saveable", 100, 200.0),
            cp.NO_REMAT: row(cp.NO_REMAT, 1000, 100.0),
            "d": row("d", 100 + extra_dots, 200.0 - 100 * spared_dots),
            "n": row("n", 100 + extra_names, 200.0 - 100 * spared_names),
        }

    trade_off = cp.gated_verdict({"s": measured(20, 0.7, 10, 0.6)}, "d", "n")
    assert trade_off.startswith("As with the two-matrix MLP, neither policy wins")
    assert "keeps 10 B more" in trade_off
    one_ahead = cp.gated_verdict({"s": measured(20, 0.5, 10, 0.6)}, "d", "n")
    assert one_ahead.startswith("Here one policy is ahead")


def test_the_recorded_gpu_trade_reads_the_committed_run():
    trades = cp.recorded_gpu_trades()
    assert trades, "the site commits an H200 run of the sharded step"
    for t in trades:
        assert t.device
        assert t.jax
        assert set(t.temp_bytes) == {"nothing_saveable", DOTS_NB}
        text = t.verdict(DOTS_NB)
        assert t.device in text
        assert text.endswith(t.time[DOTS_NB].compare(t.time["nothing_saveable"]))


def test_naming_the_probabilities_keeps_them_and_spares_no_product():
    params, x = cp.init(SHORT)
    one = jax.tree.map(lambda w: w[0], params)
    with_probs = jax.checkpoint_policies.save_only_these_names("qkv", "mlp_pre", "attn_probs")
    layer = cp.layer_fn(SHORT, with_probs, "einsum")
    kept = saved_residuals(layer, x, one).excluding_arguments()
    probs = [r for r in kept if r.name == "attn_probs"]
    assert probs
    assert probs[0].shape[-2:] == (SHORT.seq, SHORT.seq)
    assert cp.recomputed_products(SHORT, with_probs, "einsum") == cp.recomputed_products(
        SHORT, cp.CANDIDATES[NAMES], "einsum"
    )


def test_a_share_spared_is_never_shown_above_all():
    assert cp.spared_text(cp.Trade(0, 1.06)) == "all"
    assert cp.spared_text(cp.Trade(0, 0.999)) == "all"
    assert cp.spared_text(cp.Trade(0, 0.94)) == "94%"


def test_the_time_verdict_claims_an_order_only_without_overlap():
    def m(label, lo, hi):
        return cp.Measured(label, 1, None, (), Timing((lo + hi) / 2, lo, hi, 7))

    base = m("nothing_saveable", 1.0, 2.0)
    noisy = {"nothing_saveable": base, "x": m("x", 1.5, 3.0)}
    assert "cannot tell" in cp.time_verdict(noisy)
    clear = {"nothing_saveable": base, "x": m("x", 0.1, 0.5), "y": m("y", 1.1, 1.9)}
    verdict = cp.time_verdict(clear)
    assert "faster than nothing_saveable in every call: x" in verdict
    assert "overlap it: y" in verdict


@pytest.mark.slow
def test_tables_have_a_row_per_candidate(runs):
    table = cp.table(runs["short"])
    assert [row[0] for row in table.rows] == [f"`{label}`" for label in cp.CANDIDATES]
    trades = cp.trade_table(runs, [NAMES, DOTS_NB])
    assert len(trades.rows) == 4
