"""examples.notes.remat3: each point of the jax_remat3 guide, checked against this release's answer.

Releases differ in what the flag changes, so each test measures the behaviour in the same run
and checks it against an independent reading (JAX's source, a float64 derivative, a second
measurement), and that the page's words for it are the measured ones.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.notes import new_checkpoint as m
from examples.notes import remat3 as n
from examples.notes.remat3_check import _remat3_rule_exists, flag_available, remat3_flag
from examples.reference import releases
from examples.tools import compat, jaxprs
from examples.tools.residuals import saved_residuals

pytestmark = pytest.mark.skipif(
    not flag_available(), reason=f"jax {jax.__version__} has no jax_remat3 flag"
)


def _checkpoint_source() -> str:
    from jax._src import ad_checkpoint

    return inspect.getsource(ad_checkpoint.checkpoint)


def _kept(policy, remat3_on):
    return n.kept(n.residuals_of(policy, remat3_on))


def test_flag_is_off_by_default_and_restored():
    assert jaxprs.remat3_enabled() is False
    with remat3_flag(True):
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


def test_checkpoint_is_a_call_hi_primitive_holding_a_remat_traced():
    with remat3_flag(True):
        policy = jax.checkpoint_policies.dots_saveable
        traced = jax.make_jaxpr(jax.checkpoint(n.two_layers, policy=policy))(*n.two_layers_inputs())
    (eqn,) = traced.jaxpr.eqns
    assert eqn.primitive.name == "call_hi_primitive"
    remat = eqn.params["_prim"]
    assert type(remat).__name__ == "RematTraced"
    assert remat.policy is jax.checkpoint_policies.dots_saveable
    assert jaxprs.primitive_counts(traced)["remat2"] == 0


def test_when_the_flag_is_read_matches_the_source():
    source = _checkpoint_source()
    inner = source.index("def fun_remat")
    read_inside = source.find("config.remat3.value", inner) != -1
    read_outside = source.find("config.remat3.value", 0, inner) != -1
    assert read_inside != read_outside
    assert n.flag_read_at_call_time() is read_inside
    table = n.implementation_by_wrap_time()
    rows = list(zip(*(table.column(c) for c in table.header), strict=True))
    decisive = 1 if read_inside else 0  # the column the flag is read from
    for row in rows:
        expected = "`call_hi_primitive`" if row[decisive] == "on" else "`remat2`"
        assert row[2] == expected


def test_names_wrapped_before_the_flag():
    kept = n.names_kept_when_wrapped_before_the_flag()
    assert kept == ("'hidden'" if n.flag_read_at_call_time() else "nothing")


def test_static_argnames_by_keyword_and_by_position():
    with remat3_flag(True):
        by_name = jax.checkpoint(m.step_body, static_argnames="is_training")
        for flag in (True, False):
            np.testing.assert_allclose(
                jax.grad(by_name)(0.5, is_training=flag), jax.grad(m.step)(0.5, flag), rtol=1e-6
            )
    from jax._src import ad_checkpoint

    maps_names = "infer_argnums_and_argnames" in inspect.getsource(ad_checkpoint)
    outcome = n.static_outcome(True)
    if maps_names:  # the names are turned into positions: the flag is static either way
        np.testing.assert_allclose(float(outcome), jax.grad(m.step)(0.5, True), rtol=1e-5)
    else:
        assert outcome == "TracerBoolConversionError"
    assert n.static_outcome(False) == "TracerBoolConversionError"


def test_argument_names_in_listings():
    assert n.argument_names(False) == ["W", "x"]
    assert n.argument_names(True) in (["W", "x"], ["args[0]", "args[1]"])


def test_under_the_flag_only_operations_with_a_rule_or_a_name_are_kept():
    for name, policy in n.policies_to_compare().items():
        if policy is jax.checkpoint_policies.everything_saveable:
            continue  # may be special-cased as no remat at all
        for r in n.residuals_of(policy, True).excluding_arguments():
            assert r.kind == "named" or _remat3_rule_exists(str(r.primitive)) is not False, name


def _keeps_under_the_flag(policy, f, *args):
    """What ``policy`` keeps of a one-operation probe ``f`` under the flag (a kept() string)."""
    with remat3_flag(True):
        return n.kept(saved_residuals(jax.checkpoint(f, policy=policy), *args))


def _expected_under_the_flag(policy):
    """What ``policy`` should keep of two_layers under the flag, from three probes of one
    operation each: whether the flag's product rule keeps a product for this policy object,
    whether its name rule keeps a named value, and whether the policy skips the rules
    altogether (a ``sin`` keeps its ``cos``, which no rule can keep)."""
    W, x = n.two_layers_inputs()
    skips_rules = _keeps_under_the_flag(policy, lambda x: jnp.sum(jnp.sin(jnp.sin(x))), x) != (
        "nothing"
    )
    if skips_rules:
        return _kept(policy, False)
    product = _keeps_under_the_flag(policy, lambda W, x: jnp.sum(jnp.sin(W @ x)), W, x)

    def named(x):
        return jnp.sum(jnp.sin(jax.ad_checkpoint.checkpoint_name(jnp.sin(x), "hidden")))

    name = _keeps_under_the_flag(policy, named, x)
    assert product in ("nothing", "dot_general")
    assert name in ("nothing", "'hidden'")
    dot = ["dot_general"] * (product != "nothing")
    kept = [*dot, *["'hidden'"] * (name != "nothing"), *dot]
    return ", ".join(kept) or "nothing"


def test_compared_has_three_answers():
    assert n.compared("cos, 'hidden', cos", "nothing") == "nothing"
    assert n.compared("'hidden'", "'hidden'") == "the same values as without the flag"
    assert n.compared("cos, 'hidden', cos", "'hidden'") == "other values: `'hidden'`"
    for i in n.POLICY_POINTS:  # the tuple's two answers are two of the three
        assert n.POINTS[i][1:] == ("nothing", "the same values as without the flag")


@pytest.mark.parametrize(
    ("index", "policy"),
    [
        (1, lambda: n.keep_everything),
        (2, lambda: jax.checkpoint_policies.everything_saveable),
        (
            3,
            lambda: jax.checkpoint_policies.save_from_both_policies(
                jax.checkpoint_policies.dots_saveable,
                jax.checkpoint_policies.save_only_these_names("hidden"),
            ),
        ),
    ],
    ids=["plain function", "everything_saveable", "save_from_both_policies"],
)
def test_each_policy_point_is_this_releases_answer(index, policy):
    # Same set, another set, or nothing: the answer follows from the one-operation probes, so a
    # release whose product rule keeps products only for JAX's own dots object (jax 0.11.2) reads
    # "other values: 'hidden'" here and on the page, not "the same".
    expected = n.compared(_kept(policy(), False), _expected_under_the_flag(policy()))
    assert n.policy_point(policy()) == expected
    assert n.remat3_points()[index] == expected


def test_a_plain_function_and_a_combined_policy_get_the_same_product_rule():
    # save_from_both_policies builds a function too: on every release with the flag, its products
    # are kept under the flag exactly when a custom function's are.
    cp = jax.checkpoint_policies
    both = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("hidden"))
    custom, combined = _kept(n.keep_everything, True), _kept(both, True)
    assert ("dot_general" in custom) is ("dot_general" in combined)
    assert _kept(n.keep_everything, False) == "cos, 'hidden', cos"


def test_known_kinds_keep_what_they_kept():
    cp = jax.checkpoint_policies
    for policy in (None, cp.dots_saveable, cp.save_only_these_names("hidden")):
        assert _kept(policy, True) == _kept(policy, False)
    assert _kept(cp.dots_saveable, True) == "dot_general, dot_general"


def test_everything_saveable():
    everything = jax.checkpoint_policies.everything_saveable
    assert _kept(everything, True) in (_kept(everything, False), "'hidden'")


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
    with remat3_flag(remat3_on), jax.default_matmul_precision("highest"):
        f = jax.checkpoint(n.two_layers, policy=n.policies_to_compare()[name])
        grads = jax.grad(f, argnums=(0, 1))(W, x)
    for ours, ref in zip(grads, reference, strict=True):
        np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)


def test_prevent_cse_matches_the_source():
    passed_on = "prevent_cse=prevent_cse" in _checkpoint_source()
    assert n.barriers(True, False) >= 1
    assert n.barriers(False, False) == 0
    assert n.barriers(True, True) >= 1
    assert (n.barriers(False, True) == 0) is passed_on


def test_custom_remat_is_only_in_the_release_the_page_names():
    # JAX's main branch documents jax.custom_remat; the page says that of the tested releases
    # only 0.11.2 exports it (0.12.0.1 removed it). Another release that adds it fails here:
    # then run the upstream example on the page.
    assert hasattr(jax, "custom_remat") is (jax.__version__ == "0.11.2")
    if hasattr(jax, "custom_remat"):  # the page: its docstring says it needs jax_remat3
        assert "``jax_remat3`` implementation" in " ".join(jax.custom_remat.__doc__.split())


def test_release_table_reads_the_records():
    records = releases.load_all()
    table = n.release_table(records)
    flagged = [r["runinfo"]["jax"] for r in records if r["facts"]["remat3"] is not None]
    assert table.header[1:] == flagged
    for record in records:
        version = record["runinfo"]["jax"]
        if record["facts"]["remat3"] is None:  # no column; named in the caption
            assert version not in table.header
            assert version in table.caption
            continue
        assert table.column(version) == record["facts"]["remat3_points"]
        if version == jax.__version__:  # this release: the record is current
            assert table.column(version) == n.remat3_points()


def test_each_point_is_measured_on_this_release():
    points = n.remat3_points()
    if points is None:
        assert not hasattr(jax.config, "jax_remat3")
        pytest.skip(f"jax {jax.__version__} has no jax_remat3 flag")
    assert len(points) == len(n.POINTS)
    for i, (answer, (_, no, yes)) in enumerate(zip(points, n.POINTS, strict=True)):
        if i in n.POLICY_POINTS:  # three answers: the third names what is kept
            assert answer in (no, yes) or answer.startswith("other values: ")
        else:
            assert answer in (no, yes)
    # Each answer agrees with the point's own measurement above.
    assert (points[0] == n.POINTS[0][2]) is n.flag_read_at_call_time()
    assert (points[4] == n.POINTS[4][2]) is (n.barriers(False, True) == 0)


def test_two_layers_uses_named_hidden_output():
    jaxpr = jax.make_jaxpr(n.two_layers)(*n.two_layers_inputs())
    assert jaxprs.count_primitive(jaxpr, "name") == 1 or jaxprs.remat3_enabled()
    assert jnp.isfinite(n.two_layers(*n.two_layers_inputs()))


def test_the_static_cases_and_their_sentence():
    # The page's table of static-argument cases, flag off and on, and the sentence glued from it.
    want = f"{float(jax.grad(m.step)(0.5, True)):.6g}"
    keyword = [n.static_outcome(on, by_keyword=True, static_argnums=(1,)) for on in (False, True)]
    cse = [n.static_outcome(on, static_argnums=(1,), prevent_cse=(True,)) for on in (False, True)]
    if compat.jax_version() >= (0, 12):  # measured on 0.12.0.1; other releases get their own
        assert keyword == ["ValueError", "TracerBoolConversionError"]
        assert cse == [want, "NotImplementedError"]
    with pytest.raises(ValueError, match="static_argnums"):  # jax-ml/jax#18405, flag off
        jax.grad(jax.checkpoint(m.step_body, static_argnums=(1,)))(0.5, is_training=True)
    names = [n.static_outcome(on) for on in (False, True)]
    text = n.static_sentence({"names": names, "keyword": keyword, "cse": cse})
    for outcome in keyword:
        assert f"`{outcome}`" in text
    assert ("works without the flag" in text) is (cse[0] == want)
    fake = {"a": ["TracerBoolConversionError", "1.5"], "b": ["1.5", "1.5"], "c": ["1.5", "1.5"]}
    assert n.static_sentence(fake).startswith("`static_argnames` makes the argument static only")
    assert "works without the flag and works with it" in n.static_sentence(fake)


def test_the_printed_program_hides_the_primitives_name():
    # The page: the checkpoint prints as RematTraced[...] (jaxpr, policy, prevent_cse), the one
    # parameter of a call_hi_primitive equation whose name the printed program does not show.
    W, x = n.two_layers_inputs()
    with remat3_flag(True):
        checkpointed = jax.checkpoint(n.two_layers, policy=jax.checkpoint_policies.dots_saveable)
        closed = jax.make_jaxpr(checkpointed)(W, x)
    if "call_hi_primitive" not in {e.primitive.name for e in closed.jaxpr.eqns}:
        pytest.skip(f"jax {jax.__version__} traces jax_remat3 to another primitive")
    (eqn,) = closed.jaxpr.eqns
    (held,) = eqn.params.values()
    assert type(held).__name__ == "RematTraced"
    assert held.policy is jax.checkpoint_policies.dots_saveable
    if hasattr(held, "prevent_cse"):  # jax 0.10.2's RematTraced holds the jaxpr and policy only
        assert held.prevent_cse in (True, (True,) * 2)
    assert {e.primitive.name for e in held.jaxpr.eqns} >= {"call_hi_primitive"}  # the name
    printed = str(closed)
    if "call_hi_primitive" in printed:
        pytest.skip(
            f"jax {jax.__version__} prints the primitive's name (the page describes the release "
            "that builds it, jax 0.12)"
        )
    assert "RematTraced[" in printed
    assert "CheckpointName[name=hidden]" in printed


def test_excluding_a_name_under_the_flag_and_the_sentence():
    # The policy reference: under jax_remat3, excluding a name really drops an array on this
    # model (tanh has no rule of its own), unlike the default implementation.
    from examples.reference import policies

    args = policies.model_inputs()
    sizes = n.exclusion_under_flag(policies.model, args, policies.excluding_names("hidden"))
    excluded, everything = sizes
    with remat3_flag(True):
        kept = saved_residuals(jax.checkpoint(policies.model, policy=n.keep_everything), *args)
        names = {
            r.name
            for r in saved_residuals(
                jax.checkpoint(policies.model, policy=policies.excluding_names("hidden")), *args
            )
        }
    assert everything == kept.excluding_arguments().nbytes
    if everything == 0:
        # jax 0.10.2's remat3 keeps no unnamed value under keep-everything: nothing to exclude
        assert excluded == 0
    else:
        assert ("hidden" in names) is (excluded == everything)
    text = n.exclusion_sentence((excluded, everything))
    assert ("does drop an array" in text) is (excluded < everything)
    assert n.exclusion_sentence((5, 5)).endswith("no array dropped")
    assert "has no `jax_remat3` flag" in n.exclusion_sentence(None)


def test_the_cotangent_flag_takes_the_cotangent_out_of_the_barrier():
    # help(jax.checkpoint): under jax_remat3, cotangents are pinned unless
    # jax_remat_barrier_no_cotangents is on. The backward pass's two inputs are x and the
    # cotangent: both are pinned, then x alone.
    if not hasattr(jax.config, n.NO_COTANGENTS):
        assert n.barrier_operands(True) is None
        pytest.skip(f"jax {jax.__version__} has no {n.NO_COTANGENTS} (jax 0.12 has)")
    assert n.NO_COTANGENTS in " ".join(jax.checkpoint.__doc__.split())
    assert jax.config.jax_remat_barrier_no_cotangents is False  # off by default
    assert n.barrier_operands(False) == n.barrier_operands(True) == 2
    assert n.barrier_operands(True, True) == 1
    assert jax.config.jax_remat_barrier_no_cotangents is False  # put back


def test_changes_table_is_the_measured_points():
    table = n.changes_table()
    rows = {row[0]: row[1:] for row in zip(*(table.column(c) for c in table.header), strict=True)}
    cp = jax.checkpoint_policies
    own = rows["`policy=` a function of your own"]
    assert own == tuple(f"keeps {n._code(_kept(n.keep_everything, on))}" for on in (False, True))
    dots = rows["`policy=dots_saveable`"]
    assert dots[0] == dots[1] == f"keeps {n._code(_kept(cp.dots_saveable, False))}"
    early = rows["`jax.checkpoint` applied before the flag is set"]
    assert early[0] == "traces to `remat2`"
    assert (early[1] == "traces to `remat2`") is not n.flag_read_at_call_time()
    static = rows['`static_argnames="is_training"`, passed by position']
    assert static[0] == "raises `TracerBoolConversionError`"
    assert (static[1] == "works (argument static)") is (n.remat3_points()[5] == "static")


def test_releases_answering_reads_the_records():
    records = [
        {"runinfo": {"jax": v}, "facts": {"remat3_points": points}}
        for v, points in (("0.9", None), ("1.0", ["a"]), ("1.1", ["b"]), ("1.2", ["a"]))
    ]
    assert n.releases_answering(records, 0, lambda a: a == "a") == "1.0 and 1.2"
    assert n.releases_answering(records, 0, lambda a: a == "b") == "1.1"
    assert n.releases_answering(records, 0, lambda a: a == "c") == "none"
    committed = releases.load_all()
    first = n.releases_answering(committed, 0, lambda a: True).split(" and ")[0].split(", ")[0]
    assert first == next(r["runinfo"]["jax"] for r in committed if r["facts"]["remat3"] is not None)
