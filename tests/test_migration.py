"""examples.migration: every point of the migration notes, checked on the installed JAX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import migration as m


def test_old_config_option_is_unrecognized():
    raised = m.set_old_config_option()
    assert raised is not None
    assert raised.type == "AttributeError"
    assert "jax_new_checkpoint" in raised.message


def test_old_environment_variable_changes_nothing():
    report = m.old_environment_variable_effect()
    version, _, prims = report.partition(" ")
    assert version == jax.__version__
    assert prims == str(m.remat_primitive_names())


def test_checkpoint_dots_is_dots_saveable():
    policies = jax.checkpoint_policies
    assert policies.checkpoint_dots is policies.dots_saveable


def test_predict_listing_keeps_products_instead_of_sines_and_cosines():
    listings = m.predict_residuals()
    plain = listings["no checkpoint"].of_kind("output")
    dots = listings["checkpoint_dots"].of_kind("output")
    assert [r.primitive for r in plain] == ["sin", "cos", "sin", "cos"]
    assert [r.primitive for r in dots] == ["dot_general", "dot_general"]
    assert all(r.shape == (4,) for r in plain + dots)


def test_predict_gradients_agree_with_and_without_policy():
    params, x = m.predict_inputs()
    plain = jax.grad(m.summed(m.predict))(params, x)
    dots = jax.grad(m.summed(m.predict_keeping_dots))(params, x)
    for a, b in zip(plain, dots, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_constant_is_kept_only_without_checkpoint():
    listings = m.constant_residuals()
    plain = listings["no checkpoint"].excluding_arguments()
    remat = listings["jax.checkpoint"].excluding_arguments()
    assert [r.shape for r in plain] == [(m.CONSTANT_SIZE,)]
    assert plain.nbytes == 4 * m.CONSTANT_SIZE
    assert len(remat) == 0


def test_constant_gradient_matches_numpy():
    a = np.sin(np.arange(m.CONSTANT_SIZE, dtype=np.float64) / m.CONSTANT_SIZE)
    for f in (m.weighted_sum, jax.checkpoint(m.weighted_sum)):
        np.testing.assert_allclose(jax.grad(f)(2.0), a.sum(), rtol=1e-5)


def test_eager_overhead_reports_three_timings():
    timings = m.eager_overhead(repeats=2)
    assert set(timings) == {"eager, no checkpoint", "eager, jax.checkpoint", "jit, jax.checkpoint"}
    assert all(t.median_s > 0 for t in timings.values())


def test_mlp_reference_matches_jax():
    params, x = m.predict_inputs(width=5, layers=3)
    x = jnp.stack([x, -x])
    value, grads = m.mlp_loss_float64(params, np.asarray(x))
    np.testing.assert_allclose(m.mlp_loss(params, x), value, rtol=1e-5)
    with jax.default_matmul_precision("highest"):
        ours = jax.grad(m.mlp_loss)(params, x)
    for a, b in zip(ours, grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)


def test_numerical_drift_is_within_float32_rounding():
    drift = m.numerical_drift(width=16, layers=3, batch=4)
    assert drift.between_variants <= 64 * drift.float32_eps
    assert drift.from_float64 <= 64 * drift.float32_eps


def test_concrete_option_is_rejected():
    raised = m.try_concrete_option()
    assert raised is not None
    assert raised.type in {"NotImplementedError", "TypeError"}
    assert "concrete" in raised.message


def test_python_if_on_a_traced_flag_fails_and_names_static_argnums():
    raised = m.grad_with_traced_flag()
    assert raised is not None
    assert raised.type == "TracerBoolConversionError"
    assert "/" not in raised.message.split("step_traced_flag at ", 1)[-1].split(":")[0].replace(
        "examples/", ""
    )


@pytest.mark.parametrize("is_training", [True, False])
def test_static_argnums_fix_gives_the_branch_gradient(is_training):
    x = 0.5
    expected = 2 * np.cos(x) if is_training else -np.sin(x)
    np.testing.assert_allclose(jax.grad(m.step)(x, is_training), expected, rtol=1e-6)


def test_ensure_compile_time_eval():
    n = 4
    assert jax.grad(m.scaled_by_sum_of_squares)(1.0, n) == sum(k * k for k in range(n))
    raised = m.grad_without_compile_time_eval()
    assert raised is not None
    assert raised.type == "ConcretizationTypeError"
