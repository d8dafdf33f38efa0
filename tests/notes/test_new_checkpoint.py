"""examples.notes.new_checkpoint: every point of the migration notes, checked on the installed
JAX."""

from __future__ import annotations

import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.notes import new_checkpoint as m
from examples.tools import jaxprs


def test_old_config_option_is_unrecognized():
    with pytest.raises(AttributeError, match="Unrecognized config option: jax_new_checkpoint"):
        jax.config.update("jax_new_checkpoint", False)


def test_config_knows_tells_live_options_from_removed_ones():
    assert m.config_knows("jax_enable_x64")
    assert not m.config_knows("jax_new_checkpoint")


def test_old_environment_variable_changes_nothing():
    report = m.old_environment_variable_effect()
    version, _, prims = report.partition(" ")
    assert version == jax.__version__
    assert prims == str(m.remat_primitive_names())
    assert "remat2" in prims  # the child did trace a checkpoint: the comparison means something


def test_an_absl_command_line_with_the_old_flag_stops_and_a_live_flag_runs():
    stopped = m.old_absl_flag_effect("--jax_new_checkpoint=False")
    assert stopped.startswith("exit status 1:")
    assert "Unknown command line flag 'jax_new_checkpoint'" in stopped
    assert m.old_absl_flag_effect("--jax_enable_x64=True") == "ran, jax_enable_x64 = True"


def test_checkpoint_dots_is_dots_saveable():
    policies = jax.checkpoint_policies
    assert policies.checkpoint_dots is policies.dots_saveable


def test_predict_inputs_are_three_4x4_matrices_and_a_vector_of_4():
    params, x = m.predict_inputs()
    assert [W.shape for W in params] == [(4, 4)] * 3
    assert x.shape == (4,)


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
    assert len(remat) == 0  # the page says nothing is kept


def test_constant_gradient_matches_numpy():
    a = np.sin(np.arange(m.CONSTANT_SIZE, dtype=np.float64) / m.CONSTANT_SIZE)
    for f in (m.weighted_sum, jax.checkpoint(m.weighted_sum)):
        np.testing.assert_allclose(jax.grad(f)(2.0), a.sum(), rtol=1e-5)


def test_custom_vmap_rule_runs_under_checkpoint():
    demo = m.batching_rule_under_checkpoint(rows=3, width=5)
    assert demo.rule_calls
    assert all(size == 3 for size in demo.rule_calls)
    np.testing.assert_allclose(demo.result, demo.reference, rtol=1e-6)


def test_jvp_of_custom_vjp_is_not_supported_on_installed_jax():
    # The page says forward mode through custom_vjp has not landed; a release that adds it fails.
    with pytest.raises(
        TypeError, match=r"can't apply forward-mode autodiff \(jvp\) to a custom_vjp"
    ):
        jax.jvp(m.sin_with_custom_vjp, (1.0,), (1.0,))


def test_custom_vjp_sin_has_the_right_reverse_derivative():
    np.testing.assert_allclose(jax.grad(m.sin_with_custom_vjp)(0.3), np.cos(0.3), rtol=1e-6)


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


JAX_RELEASE = tuple(int(part) for part in jax.__version__.split(".")[:2])


def _expected_concrete_outcome(concrete: bool):
    """(error type, message pattern) for ``concrete=...``, per release, from the release records
    (src/examples/data/releases): None where the release accepts it."""
    if JAX_RELEASE >= (0, 11):  # PR 38665 deleted the keyword
        return TypeError, "unexpected keyword argument 'concrete'"
    if JAX_RELEASE >= (0, 10):  # any explicit value raises
        # The notes quote it: both dates, and the advice to use static_argnums.
        dates = "deprecated in JAX v0.8.2, and removed in JAX v0.10.0"
        return NotImplementedError, dates + ".*static_argnums"
    if concrete:  # since 0.3.17 concrete=True raised, pointing to static_argnums
        return NotImplementedError, "static_argnums"
    return None  # concrete=False was accepted (with a DeprecationWarning from 0.8.2 on)


@pytest.mark.parametrize("wrapper", [jax.checkpoint, jax.remat])
@pytest.mark.parametrize("concrete", [True, False])
def test_concrete_outcome_is_what_each_release_does(wrapper, concrete):
    expected = _expected_concrete_outcome(concrete)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 0.8.2 to 0.9: the warning stage
        if expected is None:
            wrapper(jnp.sin, concrete=concrete)
        else:
            error, message = expected
            with pytest.raises(error, match=message):
                wrapper(jnp.sin, concrete=concrete)


def test_concrete_error_reports_what_the_page_glues():
    expected = _expected_concrete_outcome(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        got = m.concrete_error()
    if expected is None:
        assert got == "accepted"
    else:
        error, message = expected
        assert got.startswith(error.__name__ + ": ")
        assert re.search(message, got)


def _linen_remat_outcome(**options):
    """``nn.remat`` of a one-layer module, initialised and differentiated: ``"works"`` or the
    error's type name."""
    import flax.linen as nn

    class Layer(nn.Module):
        @nn.compact
        def __call__(self, x):
            return jnp.sin(nn.Dense(3)(x))

    model = nn.remat(Layer, **options)()
    x = jnp.ones((2, 3))
    try:
        params = model.init(jax.random.key(0), x)
        jax.grad(lambda p: jnp.sum(model.apply(p, x)))(params)
    except Exception as error:
        return type(error).__name__
    return "works"


def test_flax_before_0_12_2_passes_concrete_on_and_the_page_says_what_this_pair_does():
    pytest.importorskip("flax.core.lift")
    from importlib import metadata

    version = tuple(int(p) for p in metadata.version("flax").split(".")[:3])
    passes = m.flax_passes_concrete()
    assert passes is (version < (0, 12, 2))  # google/flax commit ec85cdd, first in v0.12.2
    jax_refuses = m.concrete_error(jax.remat) != "accepted"  # jax 0.10 on refuses concrete=False
    assert jax_refuses is (JAX_RELEASE >= (0, 10))
    outcome = _linen_remat_outcome()
    if passes and jax_refuses:
        assert outcome in ("NotImplementedError", "TypeError")
    else:
        assert outcome == "works"
    if not passes:  # Flax takes concrete=False itself and refuses concrete=True
        assert _linen_remat_outcome(concrete=False) == "works"
        assert _linen_remat_outcome(concrete=True) == "NotImplementedError"
    sentence = m.flax_concrete_sentence()
    assert sentence.startswith("still passes") is passes
    assert ("refuses" in sentence) is (passes and jax_refuses)


def test_epsilon_is_the_gap_above_one():
    for dtype, bits in (("float32", 23), ("bfloat16", 7)):
        assert m.epsilon(dtype) == 2.0**-bits
        one = jnp.asarray(1.0, dtype)
        assert float(one + jnp.asarray(m.epsilon(dtype), dtype)) > 1.0
        assert float(one + jnp.asarray(m.epsilon(dtype) / 2, dtype)) == 1.0


def test_python_if_on_a_traced_flag_fails():
    with pytest.raises(jax.errors.TracerBoolConversionError, match="step_body"):
        jax.grad(jax.checkpoint(m.step_body))(0.5, True)
    with pytest.raises(jax.errors.TracerBoolConversionError, match="static_argnums"):
        jax.grad(m.step_traced_flag)(0.5, True)


def test_static_argnums_must_be_passed_positionally():
    with pytest.raises(ValueError, match=r"the `static_argnums` argument to `jax\.checkpoint`"):
        jax.grad(m.step)(0.5, is_training=True)


@pytest.mark.parametrize("by_keyword", [True, False])
def test_static_argnames_is_accepted_and_ignored_by_default(by_keyword):
    assert not jaxprs.remat3_enabled()
    if "static_argnames" not in m.parameters(jax.checkpoint):  # jax 0.9 and older
        with pytest.raises(TypeError, match="unexpected keyword argument 'static_argnames'"):
            jax.checkpoint(m.step_body, static_argnames="is_training")
        assert JAX_RELEASE < (0, 10)
        pytest.skip(f"jax {jax.__version__}'s jax.checkpoint lacks static_argnames (from 0.10)")
    by_name = jax.checkpoint(m.step_body, static_argnames="is_training")
    call = (
        (lambda: jax.grad(by_name)(0.5, is_training=True))
        if by_keyword
        else (lambda: jax.grad(by_name)(0.5, True))
    )
    with pytest.raises(jax.errors.TracerBoolConversionError):
        call()


def test_remat_rejects_static_argnames():
    with pytest.raises(TypeError, match="unexpected keyword argument 'static_argnames'"):
        jax.remat(m.step_body, static_argnames="is_training")


def test_remat_is_a_separate_narrower_function():
    ours, theirs = m.parameters(jax.checkpoint), m.parameters(jax.remat)
    assert m.prevent_cse_declarations() == (ours["prevent_cse"], theirs["prevent_cse"])
    if jax.remat is jax.checkpoint:
        # One function up to jax 0.7 (`remat = checkpoint` in JAX's source), two from 0.8.
        assert ours == theirs
        assert JAX_RELEASE < (0, 8)
        pytest.skip(f"jax {jax.__version__}: jax.remat is jax.checkpoint (two functions from 0.8)")
    assert set(theirs) == set(ours) - {"static_argnames"}
    # jax.checkpoint declares one bool per argument from jax 0.9 on (PR 31278), a bool before.
    if JAX_RELEASE >= (0, 9):
        assert "Sequence[bool]" in ours["prevent_cse"]
    else:
        assert ours["prevent_cse"] == "bool"
    # jax.remat declared a plain bool up to jax 0.10 (at least); jax 0.12.0.1 declares what
    # jax.checkpoint declares. Either way the page glues the installed pair.
    assert theirs["prevent_cse"] in ("bool", ours["prevent_cse"])
    if JAX_RELEASE == (0, 10):  # the page: "older releases, 0.10 among them, declared a bool"
        assert theirs["prevent_cse"] == "bool"
    table = m.signature_table()
    parameters = table.column("parameter")
    if "static_argnames" not in ours:  # jax 0.8 and 0.9: neither function has it
        assert JAX_RELEASE < (0, 10)
        assert "`static_argnames`" not in parameters
        return
    assert table.column("`jax.remat`")[parameters.index("`static_argnames`")] == "absent"


@pytest.mark.parametrize("wrapper", [jax.checkpoint, jax.remat])
def test_a_per_argument_prevent_cse_reaches_the_checkpoint_through_both(wrapper):
    assert m.prevent_cse_recorded(wrapper, (True, False)) == (True, False)
    assert m.prevent_cse_recorded(wrapper, False) is False


def test_remat_and_checkpoint_give_the_same_gradient():
    def f(x):
        return jnp.sum(jnp.sin(jnp.sin(x)))

    x = jnp.linspace(-1.0, 1.0, 5)
    np.testing.assert_allclose(jax.grad(jax.remat(f))(x), jax.grad(jax.checkpoint(f))(x))
    exact = np.cos(np.sin(np.asarray(x, np.float64))) * np.cos(np.asarray(x, np.float64))
    np.testing.assert_allclose(jax.grad(jax.remat(f))(x), exact, rtol=1e-6)


@pytest.mark.parametrize("is_training", [True, False])
def test_static_argnums_fix_gives_the_branch_gradient(is_training):
    x = 0.5
    branch = m.training_branch if is_training else m.evaluation_branch
    exact = 2 * np.cos(x) if is_training else -np.sin(x)
    got = jax.grad(m.step)(x, is_training)
    np.testing.assert_allclose(got, jax.grad(branch)(x), rtol=1e-6)
    np.testing.assert_allclose(got, exact, rtol=1e-6)
    np.testing.assert_allclose(m.step(x, is_training), branch(x), rtol=1e-6)


def test_the_constant_is_dropped_from_the_traced_program_but_not_from_the_compiled_step():
    # The page: the checkpoint hands XLA no table (the traced program keeps nothing), yet the
    # compiled value_and_grad holds the same temporaries either way (jax 0.5.0: 4,125,000 B;
    # 0.10.2 and 0.12.0.1: 4,000,000 B, the table itself).
    listings = m.constant_residuals()
    assert listings["no checkpoint"].nbytes >= 4 * m.CONSTANT_SIZE
    assert listings["jax.checkpoint"].excluding_arguments().nbytes == 0
    temps = m.constant_compiled_temp()
    assert temps["no checkpoint"] == temps["jax.checkpoint"] >= 4 * m.CONSTANT_SIZE


def test_the_drift_is_measured_at_the_precision_the_page_names():
    # The page: numerical_drift computes under default_matmul_precision("highest"); JAX's option
    # trades accuracy for speed on TPU and offers bfloat16 and tensorfloat32 settings.
    import inspect

    assert 'jax.default_matmul_precision("highest")' in inspect.getsource(m.numerical_drift)
    text = " ".join((jax.default_matmul_precision.__doc__ or "").split())  # the option's help
    if not text:
        pytest.skip(f"jax {jax.__version__} keeps no help text on the option")
    assert "trading off accuracy for speed" in text
    assert "TPU" in text
    for setting in ("bfloat16", "tensorfloat32"):
        with jax.default_matmul_precision(setting):  # a setting the option accepts
            pass


def test_help_still_calls_remat_an_alias():
    # The page: jax.remat's docstring calls it an alias, whether or not it is the same object.
    first = jax.remat.__doc__.strip().splitlines()[0]
    if jax.remat is jax.checkpoint:  # one object, whose docstring says so
        assert "aliased to :func:`jax.remat`" in " ".join(jax.remat.__doc__.split())
    else:
        assert first.startswith("Alias of")
