"""examples.problems.checkpoint_dot_policy: its reference against NumPy float64, and every
claim its page makes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from problems._helpers import DOTS, _close, _computed

from examples.problems import checkpoint_dot_policy as p1
from examples.tools.jaxprs import count_primitive
from examples.tools.residuals import saved_residuals

# --- the reference against NumPy ------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_dot_policy_matches_numpy_value_and_gradients(seed):
    for case in p1.make_cases(np.random.default_rng(seed)):
        w1, w2, x = case.args
        _close(p1.checkpoint_dot_policy(w1, w2, x), case.expected)
        grads = jax.grad(p1.checkpoint_dot_policy, argnums=(0, 1, 2))(w1, w2, x)
        for got, want in zip(grads, case.expected_grads, strict=True):
            _close(got, want)


def test_dot_policy_hand_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    w1, w2, x = (
        rng.standard_normal((4, 4)),
        rng.standard_normal((4, 4)),
        rng.standard_normal((3, 4)),
    )
    _, grads = p1.reference_f64(w1, w2, x)
    eps = 1e-6
    for i, arg in enumerate((w1, w2, x)):
        numeric = np.zeros_like(arg)
        for index in np.ndindex(arg.shape):
            up, down = [a.copy() for a in (w1, w2, x)], [a.copy() for a in (w1, w2, x)]
            up[i][index] += eps
            down[i][index] -= eps
            numeric[index] = (p1.reference_f64(*up)[0] - p1.reference_f64(*down)[0]) / (2 * eps)
        np.testing.assert_allclose(grads[i], numeric, rtol=1e-5, atol=1e-6)


def test_cases_are_fresh_and_away_from_relu_kinks():
    a = p1.make_cases(np.random.default_rng(0))
    b = p1.make_cases(np.random.default_rng(1))
    assert not np.array_equal(a[0].args[2], b[0].args[2])
    for case in a:
        w1, _, x = case.args
        assert np.min(np.abs(np.asarray(x, np.float64) @ np.asarray(w1, np.float64))) > 1e-3


# --- the page -------------------------------------------------------------------------------------


def test_worked_example_keeps_tanh_values_without_and_products_with_the_policy():
    """Without a checkpoint, each tanh keeps what JAX's derivative rule for tanh keeps (found in
    this run: ``tanh`` and ``sub`` on JAX 0.10.2, ``one_minus_square`` on 0.12), and the inner
    tanh's output is kept in any case, because the gradient of ``w2`` reads it."""
    w1, w2, x = p1.page_inputs(n=8, d=4)
    one_tanh = _computed(jnp.tanh, x)
    assert one_tanh, "tanh's derivative keeps something"
    inner_output = [] if ("tanh", "f32[8,4]") in one_tanh else [("tanh", "f32[8,4]")]
    plain = _computed(p1.two_tanh_layers, w1, w2, x)
    assert plain == sorted(one_tanh * 2 + inner_output)
    assert sorted(p1.tanh_derivative_keeps(x)) == [p for p, _ in one_tanh]
    keep = jax.checkpoint(p1.two_tanh_layers, policy=DOTS)
    assert _computed(keep, w1, w2, x) == [("dot_general", "f32[8,4]")] * 2
    np.testing.assert_allclose(keep(w1, w2, x), p1.two_tanh_layers(w1, w2, x), rtol=1e-6)


def test_the_forward_value_cannot_tell_the_variants_apart_only_residuals_can():
    args = p1.page_inputs(n=8, d=4)
    values = {name: float(f(*args)) for name, f in p1.VARIANTS.items()}
    assert len({round(v, 4) for v in values.values()}) == 1
    grads = {name: jax.grad(f, argnums=(0, 1, 2))(*args) for name, f in p1.VARIANTS.items()}
    for g in grads.values():
        for a, b in zip(g, grads["no checkpoint"], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    kept = {name: _computed(f, *args) for name, f in p1.VARIANTS.items()}
    assert [p for p, _ in kept["jax.checkpoint, dots_with_no_batch_dims_saveable"]] == [
        "dot_general",
        "dot_general",
    ]
    assert kept["jax.checkpoint, no policy"] == []
    assert "dot_general" not in {p for p, _ in kept["no checkpoint"]}


def test_relu_keeps_a_one_byte_mask_without_checkpoint_and_the_product_with_the_policy():
    params, h = p1.stacked_params("relu_layer", depth=1, batch=2, width=4)
    layer = jax.tree.map(lambda stacked: stacked[0], params)
    plain = saved_residuals(p1.relu_layer, h, layer).excluding_arguments()
    assert ("gt", "bool[2,4]") in [(r.primitive, r.type_str) for r in plain]
    # The zeros JAX's ReLU derivative selects from, as wide as the product (the page says so).
    assert ("broadcast_in_dim", "f32[2,4]") in [(r.primitive, r.type_str) for r in plain]
    kept = _computed(jax.checkpoint(p1.relu_layer, policy=DOTS), h, layer)
    assert kept == [("dot_general", "f32[2,4]")]


def _dot_costs(layer_name):
    layer = getattr(p1, layer_name)
    params, x = p1.stacked_params(layer_name, depth=4, batch=32, width=32)
    variants = {
        "none": layer,
        "full": jax.checkpoint(layer),
        "dots": jax.checkpoint(layer, policy=DOTS),
    }
    return p1.gradient_costs(variants, params, x)


def test_keeping_the_products_costs_memory_on_a_relu_layer():
    costs = _dot_costs("relu_layer")
    none, full, dots = costs["none"], costs["full"], costs["dots"]
    assert dots.temp_bytes > none.temp_bytes  # more, not less
    assert full.temp_bytes < none.temp_bytes
    assert full.flops > dots.flops


def test_keeping_the_products_saves_most_of_the_memory_on_an_mlp_block():
    costs = _dot_costs("mlp_block")
    none, full, dots = costs["none"], costs["full"], costs["dots"]
    assert dots.temp_bytes < 0.5 * none.temp_bytes  # most of the memory back
    assert dots.flops < 1.05 * none.flops  # next to no recomputation
    assert full.temp_bytes < dots.temp_bytes  # keeping nothing goes further...
    assert full.flops > 1.1 * dots.flops  # ...at the price of the products


def test_keeping_nothing_recomputes_the_first_product_of_the_mlp_block_only():
    # The page: keeping nothing computes the first product again (the GELU's derivative and the
    # second product's weight gradient read what follows it); the second product's output is
    # read by nothing, so it is not recomputed.
    params, x = p1.stacked_params("mlp_block", depth=1, batch=3, width=4)
    one = jax.tree.map(lambda a: a[0], params)

    def products(layer):
        grad = jax.grad(lambda p, h: jnp.sum(layer(h, p)))
        return count_primitive(jax.make_jaxpr(grad)(one, x), "dot_general")

    assert products(jax.checkpoint(p1.mlp_block)) == products(p1.mlp_block) + 1


def test_the_mlp_block_layer_matches_a_numpy_float64_forward():
    params, x = p1.stacked_params("mlp_block", depth=1, batch=3, width=4)
    p = jax.tree.map(lambda stacked: np.asarray(stacked[0], np.float64), params)
    h = np.asarray(x, np.float64)
    normed = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
    z = normed @ p["w1"]
    gelu = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    _close(p1.mlp_block(x, jax.tree.map(lambda a: a[0], params)), h + gelu @ p["w2"])


def test_a_policy_given_by_name_fails_when_the_gradient_is_traced():
    by_name = jax.checkpoint(p1.without_checkpoint, policy="dots_with_no_batch_dims_saveable")
    with pytest.raises(TypeError, match="'str' object is not callable"):
        jax.grad(by_name)(*p1.page_inputs(n=2, d=3))


def test_dots_saveable_keeps_the_batched_product_and_the_no_batch_policy_does_not():
    w1, _, _ = p1.page_inputs(n=8, d=4)
    xs = jnp.ones((2, 3, 4))
    both = jax.checkpoint(p1.batched_products, policy=jax.checkpoint_policies.dots_saveable)
    plain_only = jax.checkpoint(p1.batched_products, policy=DOTS)
    assert [t for p, t in _computed(both, w1, xs) if p == "dot_general"] == [
        "f32[2,3,4]",
        "f32[6,4]",
    ]
    assert [t for p, t in _computed(plain_only, w1, xs) if p == "dot_general"] == ["f32[6,4]"]


def test_the_policy_object_keeps_the_products_under_either_implementation():
    # The page: passing JAX's dots policy object keeps the products under jax_remat3 too, on
    # every release of the matrix that has the flag.
    from examples.tools.jaxprs import remat3, remat3_available

    def two_products(w, x):
        return jnp.sum(jnp.sin(jnp.sin(x @ w) @ w))

    f = jax.checkpoint(two_products, policy=DOTS)
    w, x = jnp.ones((3, 3)), jnp.ones((2, 3))
    kept = [r.primitive for r in saved_residuals(f, w, x).excluding_arguments()]
    assert kept == ["dot_general", "dot_general"]
    if remat3_available():
        with remat3(True):
            kept = [r.primitive for r in saved_residuals(f, w, x).excluding_arguments()]
        assert kept == ["dot_general", "dot_general"]
