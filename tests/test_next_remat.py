"""examples.next_remat: what changes under jax_remat3, each claim of the notes checked."""

from __future__ import annotations

import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import jaxprs
from examples import migration as m
from examples import next_remat as n
from examples.residuals import saved_residuals

pytestmark = pytest.mark.skipif(
    not jaxprs.remat3_available(), reason=f"jax {jax.__version__} has no jax_remat3 flag"
)


def test_flag_is_off_by_default_and_restored():
    assert jaxprs.remat3_enabled() is False
    with jaxprs.remat3():
        assert jax.config.jax_remat3 is True
    assert jax.config.jax_remat3 is False


def test_installed_source_declares_the_flag_an_upgrade():
    from jax._src import config

    source = Path(config.__file__).read_text(encoding="utf-8")
    start = source.index("name='jax_remat3'")
    declaration = source[start : source.index(")", start)]
    assert "default=False" in declaration
    assert "upgrade=True" in declaration
    assert "embrace the future of remat" in declaration


def _traced(policy=jax.checkpoint_policies.dots_saveable):
    with jaxprs.remat3():
        return jax.make_jaxpr(jax.checkpoint(n.two_layers, policy=policy))(*n.two_layers_inputs())


def test_checkpoint_is_a_call_hi_primitive_holding_a_remat_traced():
    traced = _traced()
    (eqn,) = traced.jaxpr.eqns
    assert eqn.primitive.name == "call_hi_primitive"
    assert set(eqn.params) == {"_prim"}
    remat = eqn.params["_prim"]
    assert type(remat).__name__ == "RematTraced"
    assert remat.policy is jax.checkpoint_policies.dots_saveable
    assert jaxprs.count_primitive(remat.jaxpr, "dot_general") == 2
    counts = jaxprs.primitive_counts(traced)
    assert counts["remat2"] == 0
    names = [
        type(e.params["_prim"]).__name__
        for e, _ in jaxprs.walk(traced)
        if e.primitive.name == "call_hi_primitive"
    ]
    assert names == ["RematTraced", "CheckpointName"]


def test_the_flag_is_read_when_checkpoint_wraps():
    table = n.implementation_by_wrap_time()
    by_wrap = dict(
        zip(
            zip(table.column("flag when wrapped"), table.column("flag when traced"), strict=True),
            table.column("checkpoint traces to"),
            strict=True,
        )
    )
    assert by_wrap == {
        ("off", "off"): "`remat2`",
        ("off", "on"): "`remat2`",
        ("on", "off"): "`call_hi_primitive`",
        ("on", "on"): "`call_hi_primitive`",
    }


def test_names_are_lost_when_wrapped_before_and_run_after_the_flag():
    f = jax.checkpoint(n.two_layers, policy=jax.checkpoint_policies.save_only_these_names("hidden"))
    assert n.kept(saved_residuals(f, *n.two_layers_inputs())) == "'hidden'"
    with jaxprs.remat3():
        assert n.kept(saved_residuals(f, *n.two_layers_inputs())) == "nothing"


def test_static_argnames_works_under_the_flag_for_keyword_arguments():
    with jaxprs.remat3():
        by_name = jax.checkpoint(m.step_body, static_argnames="is_training")
        for flag in (True, False):
            np.testing.assert_allclose(
                jax.grad(by_name)(0.5, is_training=flag), jax.grad(m.step)(0.5, flag), rtol=1e-6
            )
        with pytest.raises(jax.errors.TracerBoolConversionError):
            jax.grad(by_name)(0.5, True)


def _kept(policy, remat3_on):
    return n.kept(n.residuals_of(policy, remat3_on))


def test_docstring_still_describes_policies_as_functions():
    text = " ".join(jax.checkpoint.__doc__.split())
    assert "The callable takes as input a type-level specification of a first-order" in text


def test_custom_function_policy_becomes_full_remat():
    assert n.keep_everything(jax.lax.sin_p) is True
    assert _kept(n.keep_everything, True) == "nothing"
    assert _kept(n.keep_everything, False) == n.kept(n.residuals_of(None, False, checkpoint=False))


def test_save_anything_except_these_names_ignores_its_names():
    policy = jax.checkpoint_policies.save_anything_except_these_names("hidden")
    assert policy(jax.lax.sin_p) is True  # says "save" to anything, the excluded name included
    assert _kept(policy, False) == "cos, 'hidden', cos"  # the excluded name is kept
    assert _kept(policy, True) == "nothing"
    source = Path(inspect.getsourcefile(jax.checkpoint_policies.save_anything_except_these_names))
    assert "this policy probably just doesn't work" in source.read_text(encoding="utf-8")


def test_everything_saveable_keeps_only_the_named_value_under_the_flag():
    everything = jax.checkpoint_policies.everything_saveable
    assert _kept(everything, False) == n.kept(n.residuals_of(None, False, checkpoint=False))
    assert _kept(everything, True) == "'hidden'"


def test_known_kinds_keep_what_they_kept():
    cp = jax.checkpoint_policies
    for policy in (None, cp.dots_saveable, cp.save_only_these_names("hidden")):
        assert _kept(policy, True) == _kept(policy, False)
    assert _kept(cp.dots_saveable, True) == "dot_general, dot_general"


def test_save_from_both_policies_becomes_full_remat():
    cp = jax.checkpoint_policies
    both = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("hidden"))
    assert _kept(both, False) == "dot_general, 'hidden', dot_general"
    assert _kept(both, True) == "nothing"


def test_arguments_are_named_by_position_under_the_flag():
    for on, names in [(False, ["W", "x"]), (True, ["args[0]", "args[1]"])]:
        listing = n.residuals_of(None, on)
        assert [r.argument for r in listing.of_kind("argument")] == names


def test_policy_table_matches_the_listings():
    table = n.policy_table()
    rows = dict(
        zip(
            table.column("policy"),
            zip(
                table.column("default (`remat2`) keeps"),
                table.column("`jax_remat3` keeps"),
                strict=True,
            ),
            strict=True,
        )
    )
    assert rows["`keep_everything (custom function)`"] == ("`cos`, `'hidden'`, `cos`", "nothing")
    assert rows["`everything_saveable`"] == ("`cos`, `'hidden'`, `cos`", "`'hidden'`")
    assert len(rows) == len(n.policies_to_compare()) + 1


def test_reference_gradient_matches_jax_without_remat():
    W, x = n.two_layers_inputs()
    with jax.default_matmul_precision("highest"):
        grads = jax.grad(n.two_layers, argnums=(0, 1))(W, x)
    for ours, ref in zip(grads, n.two_layers_grad_float64(W, x), strict=True):
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(n.policies_to_compare()))
@pytest.mark.parametrize("remat3_on", [False, True])
def test_every_policy_gives_the_exact_gradient(name, remat3_on):
    W, x = n.two_layers_inputs()
    reference = n.two_layers_grad_float64(W, x)
    with jaxprs.remat3(remat3_on), jax.default_matmul_precision("highest"):
        f = jax.checkpoint(n.two_layers, policy=n.policies_to_compare()[name])
        grads = jax.grad(f, argnums=(0, 1))(W, x)
    for ours, ref in zip(grads, reference, strict=True):
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


def test_prevent_cse_is_not_passed_to_remat3():
    assert n.barriers(True, False) >= 1
    assert n.barriers(False, False) == 0
    assert n.barriers(True, True) == n.barriers(False, True) >= 1


def test_two_layers_uses_named_hidden_output():
    jaxpr = jax.make_jaxpr(n.two_layers)(*n.two_layers_inputs())
    assert jaxprs.count_primitive(jaxpr, "name") == 1
    assert jnp.isfinite(n.two_layers(*n.two_layers_inputs()))
