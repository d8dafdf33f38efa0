"""The reference solutions against NumPy float64, and the helpers the checker relies on."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import errors as flax_errors

from examples.jaxprs import remat_sites
from examples.problems import (
    PROBLEMS,
    checkpoint_dot_policy,
    nn_checkpoint_forward,
    nnx_remat_policy,
)
from examples.problems import jax_checkpoint as p1
from examples.problems import linen_checkpoint as p2
from examples.problems import nnx_remat as p3
from examples.problems._common import compare_policy
from examples.residuals import saved_residuals

DOTS = jax.checkpoint_policies.dots_with_no_batch_dims_saveable


@pytest.fixture(autouse=True)
def _full_float32_products():
    """A GPU's default TF32 products (or a TPU's bfloat16 passes) are not float32 references."""
    with jax.default_matmul_precision("highest"):
        yield


def _close(actual, expected, rtol=1e-4, atol=1e-6):
    actual = np.asarray(actual, np.float64)
    scale = np.max(np.abs(expected), initial=0.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol + rtol * scale)


@pytest.mark.parametrize("seed", [0, 1])
def test_dot_policy_matches_numpy_value_and_gradients(seed):
    for case in p1.make_cases(np.random.default_rng(seed)):
        w1, w2, x = case.args
        _close(checkpoint_dot_policy(w1, w2, x), case.expected)
        grads = jax.grad(checkpoint_dot_policy, argnums=(0, 1, 2))(w1, w2, x)
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


def test_remat_changes_neither_value_nor_gradient_only_residuals():
    args = p1.page_inputs(n=8, d=4)
    values = {name: float(f(*args)) for name, f in p1.VARIANTS.items()}
    assert len({round(v, 4) for v in values.values()}) == 1
    grads = {name: jax.grad(f, argnums=(0, 1, 2))(*args) for name, f in p1.VARIANTS.items()}
    for g in grads.values():
        for a, b in zip(g, grads["no checkpoint"], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    kept = {
        name: saved_residuals(f, *args).excluding_arguments() for name, f in p1.VARIANTS.items()
    }
    assert [r.primitive for r in kept["jax.checkpoint, dots_with_no_batch_dims_saveable"]] == [
        "dot_general",
        "dot_general",
    ]
    assert len(kept["jax.checkpoint, no policy"]) == 0
    assert "dot_general" not in {r.primitive for r in kept["no checkpoint"]}
    assert len(kept["no checkpoint"]) > 0


def test_linen_checkpoint_does_not_change_initial_parameters():
    x = jnp.ones(5)
    plain = p2.MLP(features=3).init(jax.random.PRNGKey(7), x)
    lifted = nn.checkpoint(p2.MLP)(features=3).init(jax.random.PRNGKey(7), x)
    jax.tree.map(np.testing.assert_array_equal, plain, lifted)


@pytest.mark.parametrize(("problem", "fn"), [(p2, nn_checkpoint_forward), (p3, nnx_remat_policy)])
def test_flax_references_match_numpy(problem, fn):
    for case in problem.make_cases(np.random.default_rng(5)):
        seed, x, features = case.args
        out = fn(seed, x, features)
        assert out.shape == (int(features),)
        assert out.dtype == jnp.float32
        _close(out, case.expected)
        ct = jnp.asarray(case.cotangent, jnp.float32)
        grad = jax.grad(lambda x, seed=seed, f=features, ct=ct: jnp.sum(fn(seed, x, f) * ct))(x)
        _close(grad, case.expected_grads[0])


def test_nnx_numpy_forward_is_independent_of_the_module():
    params = p3.reference_params(3.0, 4.0)
    x = np.linspace(-1, 1, 4)
    y, _, _ = p3.reference_f64(params, x, np.ones(4))
    manual = np.maximum(
        np.maximum(x @ params["k1"] + params["b1"], 0) @ params["k2"] + params["b2"], 0
    )
    np.testing.assert_array_equal(y, manual)
    assert params["k1"].shape == (4, 4)


def test_nnx_policy_keeps_products_and_nothing_saveable_keeps_none():
    graphdef, state, x = p3.page_model(features=8)
    keep = p3.loss_of(graphdef, p3.forward_under(DOTS))
    none = p3.loss_of(graphdef, p3.forward_under(jax.checkpoint_policies.nothing_saveable))
    plain = p3.loss_of(graphdef, p3.forward_under(None, remat=False))
    kept = saved_residuals(keep, state, x).excluding_arguments()
    assert [r.primitive for r in kept] == ["dot_general", "dot_general"]
    assert len(saved_residuals(none, state, x).excluding_arguments()) == 0
    assert "gt" in {r.primitive for r in saved_residuals(plain, state, x)}


def test_remat_sites_look_inside_jit_and_count_nesting():
    double = jax.jit(jax.checkpoint(jax.checkpoint(p1._pipeline), policy=DOTS))
    sites = remat_sites(jax.make_jaxpr(double)(*p1.page_inputs(n=2, d=3)).jaxpr)
    assert sorted(s.depth for s in sites) == [0, 1]
    assert all(s.products == 2 for s in sites)
    assert remat_sites(jax.make_jaxpr(p1._pipeline)(*p1.page_inputs(n=2, d=3)).jaxpr) == []


def test_compare_policy_by_identity_and_by_behaviour():
    assert compare_policy(DOTS, DOTS)[0]
    # A wrapper is another object but keeps the same values.
    ok, detail = compare_policy(lambda *a, **k: DOTS(*a, **k), DOTS)
    assert ok
    assert "another object" in detail
    # dots_saveable also keeps products with a batch dimension: the probe tells them apart.
    assert not compare_policy(jax.checkpoint_policies.dots_saveable, DOTS)[0]
    assert not compare_policy(None, DOTS)[0]
    assert compare_policy(None, None)[0]
    assert compare_policy(jax.checkpoint_policies.nothing_saveable, None)[0]


def test_cases_are_fresh_and_away_from_relu_kinks():
    a = p1.make_cases(np.random.default_rng(0))
    b = p1.make_cases(np.random.default_rng(1))
    assert not np.array_equal(a[0].args[2], b[0].args[2])
    for case in a:
        w1, _, x = case.args
        assert np.min(np.abs(np.asarray(x, np.float64) @ np.asarray(w1, np.float64))) > 1e-3
    assert set(PROBLEMS) == {"checkpoint_dot_policy", "nn_checkpoint_forward", "nnx_remat_policy"}


def test_page_pitfalls_raise_the_errors_the_pages_describe():
    with pytest.raises(flax_errors.TransformTargetError):
        p2.wrap_an_instance()
    with pytest.raises(TypeError, match="abstract array"):
        p3.policy_passed_positionally()
    with pytest.raises(TypeError, match="not callable"):
        jax.grad(p1.under_policy(p1._pipeline, "dots_with_no_batch_dims_saveable"))(
            *p1.page_inputs(n=2, d=3)
        )
