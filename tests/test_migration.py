"""examples.migration: every point of the migration notes, checked on the installed JAX."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import examples
from examples import migration as m

# The folder holding the package on this machine: no message shown on a page may contain it.
_MACHINE_PATH = str(Path(examples.__file__).resolve().parent.parent)


def test_old_config_option_is_unrecognized():
    raised = m.set_old_config_option()
    assert raised is not None
    assert raised.type == "AttributeError"
    assert "Unrecognized config option" in raised.message
    assert "jax_new_checkpoint" in raised.message


def test_config_knows_tells_live_options_from_removed_ones():
    assert m.config_knows("jax_enable_x64")
    assert not m.config_knows("jax_new_checkpoint")


def test_old_environment_variable_changes_nothing():
    report = m.old_environment_variable_effect()
    version, _, prims = report.partition(" ")
    assert version == jax.__version__
    assert prims == str(m.remat_primitive_names())
    assert "remat2" in prims  # the child did trace a checkpoint: the comparison means something


def test_checkpoint_dots_is_dots_saveable():
    policies = jax.checkpoint_policies
    assert policies.checkpoint_dots is policies.dots_saveable


def test_predict_listing_structure():
    _, x = m.predict_inputs()
    listings = m.predict_residuals()
    arguments = ["params[0]", "params[1]", "params[2]", "x"]
    for listing in listings.values():
        assert [r.argument for r in listing.of_kind("argument")] == arguments

    plain = listings["no checkpoint"].excluding_arguments()
    remat = listings["jax.checkpoint, no policy"].excluding_arguments()
    dots = listings["jax.checkpoint, checkpoint_dots"].excluding_arguments()
    # Each hidden layer leaves sin (input of the next product) and cos (derivative of sin).
    assert [r.primitive for r in plain] == ["sin", "cos", "sin", "cos"]
    assert len(remat) == 0
    assert [r.primitive for r in dots] == ["dot_general", "dot_general"]
    assert all(r.shape == x.shape and r.dtype == np.float32 for r in plain + dots)
    assert dots.nbytes == 2 * x.size * 4


def test_predict_gradients_agree_across_variants_and_with_numpy():
    params, x = m.predict_inputs()
    # float64 reference for d sum(predict) / d x, by the chain rule.
    ps = [np.asarray(W, np.float64) for W in params]
    hs = [np.asarray(x, np.float64)]
    for W in ps[:-1]:
        hs.append(np.sin(W @ hs[-1]))
    g = ps[-1].sum(axis=0)
    for W, h in zip(reversed(ps[:-1]), reversed(hs[:-1]), strict=True):
        g = (g * np.cos(W @ h)) @ W
    for f in m.PREDICT_VARIANTS.values():
        with jax.default_matmul_precision("highest"):
            grad_x = jax.grad(m.summed(f), argnums=1)(params, x)
        np.testing.assert_allclose(grad_x, g, rtol=1e-5, atol=1e-6)


def test_constant_is_kept_only_without_checkpoint():
    listings = m.constant_residuals()
    plain = listings["no checkpoint"].excluding_arguments()
    remat = listings["jax.checkpoint"]
    assert [(r.shape, r.primitive) for r in plain] == [((m.CONSTANT_SIZE,), "sin")]
    assert plain.nbytes == 4 * m.CONSTANT_SIZE
    assert not any(r.shape == (m.CONSTANT_SIZE,) for r in remat)
    assert remat.nbytes < 1024


def test_constant_gradient_matches_numpy():
    a = np.sin(np.arange(m.CONSTANT_SIZE, dtype=np.float64) / m.CONSTANT_SIZE)
    for f in (m.weighted_sum, jax.checkpoint(m.weighted_sum)):
        np.testing.assert_allclose(jax.grad(f)(2.0), a.sum(), rtol=1e-5)


def test_eager_overhead_reports_three_timings():
    timings = m.eager_overhead(repeats=7)
    assert set(timings) == {"eager, no checkpoint", "eager, jax.checkpoint", "jit, jax.checkpoint"}
    assert all(t.repeats == 7 and t.median_s > 0 for t in timings.values())


def test_custom_vmap_rule_runs_under_checkpoint():
    demo = m.batching_rule_under_checkpoint(rows=3, width=5)
    assert demo.rule_calls
    assert all(size == 3 for size in demo.rule_calls)
    np.testing.assert_allclose(demo.result, demo.reference, rtol=1e-6)


def test_jvp_of_custom_vjp_on_installed_jax():
    raised = m.jvp_of_custom_vjp()
    # The page states what this returns; if a JAX release adds forward mode, this flags the page.
    assert raised is not None
    assert raised.type == "TypeError"
    assert "custom_vjp" in raised.message


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
    assert 0.0 <= drift.between_rel <= 64 * drift.float32_eps
    assert 0.0 < drift.from_float64 <= 64 * drift.float32_eps  # float32 is never exact here
    assert drift.float32_eps == np.finfo(np.float32).eps


def test_drift_verdict_reports_both_cases():
    eps = float(np.finfo(np.float32).eps)
    assert "identical" in m.Drift(0.0, 0.0, 3 * eps, eps).verdict()
    differing = m.Drift(1e-7, 2 * eps, 3 * eps, eps).verdict()
    assert "differ by at most 2 float32 epsilons" in differing


def test_concrete_option_is_rejected():
    raised = m.try_concrete_option()
    assert raised is not None
    # NotImplementedError with advice on JAX 0.10; an unknown keyword (TypeError) once removed.
    assert raised.type in {"NotImplementedError", "TypeError"}
    assert "concrete" in raised.message


def test_python_if_on_a_traced_flag_fails():
    raised = m.grad_with_traced_flag()
    assert raised is not None
    assert raised.type in {"TracerBoolConversionError", "ConcretizationTypeError"}
    assert "step_traced_flag" in raised.message
    assert _MACHINE_PATH not in raised.message


@pytest.mark.parametrize("is_training", [True, False])
def test_static_argnums_fix_gives_the_branch_gradient(is_training):
    x = 0.5
    branch = m.training_branch if is_training else m.evaluation_branch
    exact = 2 * np.cos(x) if is_training else -np.sin(x)
    got = jax.grad(m.step)(x, is_training)
    np.testing.assert_allclose(got, jax.grad(branch)(x), rtol=1e-6)
    np.testing.assert_allclose(got, exact, rtol=1e-6)
    np.testing.assert_allclose(m.step(x, is_training), branch(x), rtol=1e-6)


def test_ensure_compile_time_eval_gives_a_concrete_value():
    n = 4
    expected = sum(k * k for k in range(n))
    seen = m.value_seen_while_tracing(n, compile_time_eval=True)
    assert seen.concrete
    assert str(expected) in seen.shown
    staged = m.value_seen_while_tracing(n, compile_time_eval=False)
    assert not staged.concrete
    assert jax.grad(m.scaled_by_sum_of_squares)(1.0, n) == expected
    assert jax.grad(m.scaled_by_sum_of_squares)(1.0, 5) == expected + 16


def test_int_on_a_staged_value_fails():
    raised = m.grad_without_compile_time_eval()
    assert raised is not None
    assert raised.type == "ConcretizationTypeError"
