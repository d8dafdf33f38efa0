"""examples.reference.release_facts: the facts agree with what the installed JAX does, and with the
committed record of this release."""

from __future__ import annotations

import contextlib
import io
import json
import math
import warnings

import jax
import jax.numpy as jnp
import pytest

from examples.reference import release_facts, releases
from examples.tools import jaxprs
from examples.tools.residuals import saved_residuals
from examples.tutorial import traced as tutorial

P = jax.checkpoint_policies


# --- the facts, against what the installed JAX does -----------------------------------------------


def test_primitive_is_the_one_the_jaxpr_walker_finds(facts):
    assert facts["remat_primitive"] == jaxprs.remat_primitive_name()


def test_dots_listing_is_jax_own_print_without_sources(facts):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jax.ad_checkpoint.print_saved_residuals(tutorial.f_dots_saveable, *tutorial.chain_inputs())
    printed = [
        line if " from the argument " in line else line.split(" from ", 1)[0]
        for line in out.getvalue().splitlines()
    ]
    assert facts["dots_residuals"] == printed
    computed = [line for line in printed if " from the argument " not in line]
    assert [line.split()[0] for line in computed] == ["f32[5]", "f32[6]", "f32[7]"]
    assert not any("/" in line for line in facts["dots_residuals"])


def test_policy_names_are_what_the_namespace_holds(facts):
    names = facts["policy_names"]
    assert "dots_with_no_batch_dims_saveable" in names
    assert all(callable(getattr(P, n)) for n in names)
    assert set(names) == {n for n in dir(P) if not n.startswith("_")}


def test_remat_alias_fact_and_the_same_program(facts):
    assert facts["remat_is_checkpoint"] == (jax.remat is jax.checkpoint)
    # Alias or wrapper, jax.remat traces to the program jax.checkpoint does.
    assert tutorial.remat_vs_checkpoint()["same_jaxpr"]


def _replay(call, expected):
    """The outcome of ``call`` measured here, independently of examples.reference.releases."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = call()
        except Exception as err:
            return "raises", type(err).__name__
    return ("accepted" if jnp.allclose(result, expected) else "wrong result"), None


@pytest.mark.parametrize(
    ("key", "call", "expected"),
    [
        (
            "concrete_true",
            lambda: jax.checkpoint(lambda x: jnp.sin(x) if x > 0 else jnp.cos(x), concrete=True)(
                2.0
            ),
            jnp.sin(2.0),
        ),
        ("concrete_false", lambda: jax.checkpoint(jnp.sin, concrete=False)(2.0), jnp.sin(2.0)),
        (
            "checkpoint_static_argnames",
            lambda: jax.checkpoint(
                lambda x, flag: jnp.sin(x) if flag else jnp.cos(x), static_argnames=("flag",)
            )(2.0, flag=False),
            jnp.cos(2.0),
        ),
        (
            "remat_static_argnames",
            lambda: jax.remat(
                lambda x, flag: jnp.sin(x) if flag else jnp.cos(x), static_argnames=("flag",)
            )(2.0, flag=False),
            jnp.cos(2.0),
        ),
    ],
)
def test_keyword_outcomes_match_a_replay(facts, key, call, expected):
    fact = facts[key]
    assert (fact["outcome"], fact["error"]) == _replay(call, expected)


def test_a_declared_keyword_is_never_a_type_error(facts):
    """Where jax.checkpoint declares a keyword, passing it is no TypeError."""
    declared = facts["checkpoint_keywords"]
    assert (facts["checkpoint_static_argnames"]["error"] == "TypeError") == (
        "static_argnames" not in declared
    )
    if "concrete" in declared:
        assert facts["concrete_true"]["error"] != "TypeError"


def test_except_names_facts_agree_with_each_other(facts):
    """A policy that refuses nothing keeps what everything_saveable keeps."""
    kept = facts["except_names_bytes"]
    if not facts["except_names_refuses"]:
        assert kept["except_a"] == kept["everything"]
    # Independently: the residuals of f_named under everything_saveable, by shape (float32).
    every = jax.checkpoint(tutorial.f_named, policy=P.everything_saveable)
    computed = saved_residuals(every, *tutorial.chain_inputs()).excluding_arguments()
    assert kept["everything"] == 4 * sum(math.prod(r.shape) for r in computed)
    # Asked directly, with a stand-in for the name primitive, the policy answers as measured.
    policy = P.save_anything_except_these_names("a")
    eqn = release_facts._named_equation()
    assert eqn.params["name"] == "a"
    refused = not policy(eqn.primitive, *[v.aval for v in eqn.invars], **eqn.params)
    assert refused == facts["except_names_refuses"]


def test_remat3_fact(facts):
    if not jaxprs.remat3_available():
        assert facts["remat3"] is None
        return
    with jaxprs.remat3():
        assert facts["remat3"] == jaxprs.remat_primitive_name()
    assert facts["remat3"] != facts["remat_primitive"]


def test_outcome_names_errors_and_warnings():
    def warns():
        warnings.warn("old", DeprecationWarning, stacklevel=1)
        return jnp.ones(())

    assert release_facts._outcome(lambda: 1 / 0) == {
        "outcome": "raises",
        "error": "ZeroDivisionError",
        "warning": None,
    }
    assert release_facts._outcome(warns, jnp.ones(()))["warning"] == "DeprecationWarning"
    assert release_facts._outcome(lambda: jnp.zeros(()), jnp.ones(()))["outcome"] == "wrong result"


def test_the_package_bound_is_read_from_its_metadata():
    bound = release_facts.package_bound("jax")
    assert bound.startswith("jax>=")
    with pytest.raises(LookupError, match="does not require"):
        release_facts.package_bound("torch")


# --- the committed record of this release ---------------------------------------------------------


@pytest.mark.cpu_figures
def test_the_committed_record_of_the_installed_release_holds_here(facts):
    """If the matrix recorded this JAX, what it recorded is what this JAX does now.

    In the matrix this compares with the record of the previous run, before it is replaced. Only
    the facts are compared, read from the file as JSON: a record written before the schema last
    grew still holds the facts (tests/test_release_data.py checks the records themselves).
    """
    path = releases.DATA / releases.file_name(jax.__version__)
    if not path.is_file():
        pytest.skip(f"no committed record of jax {jax.__version__} (the matrix writes one)")
    committed = json.loads(path.read_text(encoding="utf-8"))["facts"]
    assert committed == json.loads(json.dumps(facts))
