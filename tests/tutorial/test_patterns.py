"""The tutorial's practical patterns: placements compiled, a nested scan, dropout recomputed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.tools.models import scan_loss
from examples.tutorial import compiled as J
from examples.tutorial import patterns as S
from examples.tutorial import traced as T

cpu_only = pytest.mark.skipif(
    jax.default_backend() != "cpu",
    reason="the page's XLA figures are measured on CPU; other backends compile differently",
)


def _mlp_np(params, x, masks=None, rate=0.5):
    Ws, bs = (np.asarray(p, np.float64) for p in params)
    h = np.asarray(x, np.float64)
    for i, (W, b) in enumerate(zip(Ws, bs, strict=True)):
        h = np.maximum(h @ W + b, 0.0)
        if masks is not None:
            h = np.where(masks[i], h / (1.0 - rate), 0.0)
    return np.mean(h**2)


def _numeric_grad_W(loss_np, params, x, layer=0, entries=((0, 0), (1, 2), (3, 1))):
    """Central differences in float64 for a few entries of one layer's W."""
    Ws, bs = (np.asarray(p, np.float64) for p in params)
    out = []
    for i, j in entries:
        step = np.zeros_like(Ws)
        step[layer, i, j] = 1e-6
        out.append((loss_np((Ws + step, bs), x) - loss_np((Ws - step, bs), x)) / 2e-6)
    return np.array(out)


@pytest.mark.parametrize("group", [1, 2, 4])
def test_nested_scan_matches_the_flat_scan_and_numpy(group):
    params, x = J.mlp_inputs(depth=4, batch=8, width=8)
    nested = S.nested_scan_loss(J.dense_relu, group)
    np.testing.assert_allclose(nested(params, x), _mlp_np(params, x), rtol=1e-5)
    got = jax.grad(nested)(params, x)
    flat = jax.grad(scan_loss(J.dense_relu))(params, x)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(flat), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    entries = ((0, 0), (1, 2), (3, 1))
    want = _numeric_grad_W(_mlp_np, params, x, entries=entries)
    np.testing.assert_allclose([got[0][0, i, j] for i, j in entries], want, rtol=1e-3, atol=1e-6)


def test_nested_scan_refuses_a_ragged_group():
    params, x = J.mlp_inputs(depth=6, batch=2, width=4)
    with pytest.raises(ValueError, match="not a multiple"):
        S.nested_scan_loss(J.dense_relu, 4)(params, x)


@cpu_only
def test_nested_scan_needs_less_memory_than_the_flat_checkpointed_scan():
    rows = S.nested_rows(depth=16, batch=1024, width=64, groups=(4,))
    by = {r.name: r for r in rows}
    plain, flat = by["flat scan, plain body"], by["flat scan, jax.checkpoint(body)"]
    nested = by["nested scan, groups of 4"]
    assert flat.temp_bytes < plain.temp_bytes
    assert nested.temp_bytes < flat.temp_bytes
    facts = S.nested_facts(rows, 16)
    assert facts["nested_group"] == 4
    assert facts["nested_lower"] is True
    assert facts["nested_relation"].endswith("less temporary memory than")
    assert S.nested_table(rows).column("gradient of") == [r.name for r in rows]


def test_a_relu_layer_keeps_its_input_and_its_derivative_and_the_optimum_follows():
    # The page's count L/G + rG: r is 2 for dense_relu (the input for the weight's gradient,
    # and one array for the ReLU's derivative), counted by shape; a layer that needs only its
    # input (a linear layer: the product's derivative is the weight) gives r = 1.
    assert S.activations_per_layer() == 2
    assert S.activations_per_layer(lambda h, Wb: h @ Wb[0] + Wb[1]) == 1
    rows = [S.NestedRow("flat scan, jax.checkpoint(body)", None, 10), S.NestedRow("g8", 8, 5)]
    facts = S.nested_facts(rows, 64, 2)
    assert facts["nested_predicted_group"] == "5.7"  # sqrt(64 / 2)
    assert S.nested_facts(rows, 64)["nested_predicted_group"] == "8.0"


def test_dropout_under_checkpoint_draws_the_same_mask():
    grads = S.dropout_gradients(depth=3, batch=8, width=8)
    for a, b in zip(
        jax.tree.leaves(grads["plain"]), jax.tree.leaves(grads["checkpointed"]), strict=True
    ):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    # Against float64 NumPy with the masks drawn from the same keys.
    params, x = J.mlp_inputs(3, 8, 8)
    keys = jax.random.split(jax.random.key(1), 3)
    masks = [np.asarray(jax.random.bernoulli(k, 0.5, (8, 8))) for k in keys]
    assert not all(m.all() for m in masks)  # the masks do drop something
    loss_np = lambda p, x_: _mlp_np(p, x_, masks)
    want = _numeric_grad_W(loss_np, params, x, layer=2)
    got = grads["checkpointed"][0]
    got_entries = [got[2, i, j] for i, j in ((0, 0), (1, 2), (3, 1))]
    np.testing.assert_allclose(got_entries, want, rtol=1e-3, atol=1e-6)


@cpu_only
def test_a_checkpoint_that_splits_a_fused_loop_costs_memory_under_xla():
    # The page: the barrier is opaque to fusion, so "checkpoint h" runs more fused loops than no
    # checkpoint and stores an intermediate that the single loop never did.
    big = jnp.linspace(0.1, 1.0, 2**20)
    plain, last = "no checkpoint", "checkpoint h (last stage)"
    for name, fn in T.composition_variants().items():  # each checkpoint's barrier, before XLA
        lowered = jax.jit(jax.grad(lambda u, fn=fn: jnp.sum(fn(u)))).lower(big).as_text()
        assert ("stablehlo.optimization_barrier" in lowered) is (name != plain), name
    fusions, temps = S.placement_fusions(big), S.placement_temp_bytes(big)
    assert S.placement_temp_text(fusions, unit=None).startswith(f"no checkpoint: {fusions[plain]};")
    if fusions[last] == fusions[plain]:
        pytest.skip(
            f"jax {jax.__version__}: XLA fuses 'checkpoint h' into as many loops as no "
            "checkpoint (the page's claim is about the release that builds it, jax 0.12)"
        )
    assert fusions[last] > fusions[plain]
    assert temps[last] >= big.nbytes > temps[plain]


@cpu_only
def test_placement_temp_bytes_cover_every_placement():
    v = jnp.linspace(0.1, 1.0, 1024)
    temps = S.placement_temp_bytes(v)
    assert list(temps) == list(T.composition_variants())
    assert all(isinstance(b, int) and b >= 0 for b in temps.values())
    text = S.placement_temp_text(temps)
    assert text.count("; ") == len(temps) - 1
    assert text.startswith("no checkpoint: ")


@cpu_only
def test_placement_xla_table_puts_traced_peaks_beside_xlas_figures():
    v = jnp.linspace(0.1, 1.0, 1024)
    peaks = T.composition_peaks(v)
    temps, fusions = S.placement_temp_bytes(v), S.placement_fusions(v)
    table = S.placement_xla_table(peaks, temps, fusions).to_markdown().splitlines()
    assert len(table) == 2 + len(T.composition_variants())
    plain = next(line for line in table if line.startswith("| no checkpoint |"))
    assert f"| {peaks['no checkpoint']} |" in plain
    assert plain.rstrip(" |").endswith(str(fusions["no checkpoint"]))
