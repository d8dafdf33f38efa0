"""examples.problems itself: discovery and the list of problems, and the checker's machinery
(remat sites and names, policy comparison, residual signatures, placement) under both remat
implementations."""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name
from problems._helpers import DOTS, NOTHING, P
from remat_modes import REMAT_MODES

import examples.problems
from examples.check import main
from examples.problems import (
    DiscoveryError,
    all_problems,
    load_problem,
    problem_names,
)
from examples.problems import checkpoint_dot_policy as dots_problem
from examples.problems import checkpoint_dot_policy as p1
from examples.problems import save_only_named as p6
from examples.problems import scan_remat_body as p4
from examples.problems._checks import (
    OTHER_NAME,
    compare_policy,
    policy_name,
    remat3_ignores_function_policies,
    residual_listing,
    residual_signature,
)
from examples.problems._placement import place
from examples.tools.jaxprs import (
    checkpoint_names,
    jit_inlined,
    primitive_counts,
    remat3,
    remat3_available,
    remat_sites,
)
from examples.tools.residuals import saved_residuals

ROOT = Path(__file__).resolve().parents[2]


PAGES = ROOT / "docs" / "problems"


# --- discovery ------------------------------------------------------------------------------------


def page_names() -> set[str]:
    return {p.stem for p in PAGES.glob("*.md")} - {"index"}


def mismatches(modules: set[str], pages: set[str]) -> list[str]:
    """What is missing on either side: a module without a page, a page without a module."""
    return [
        *(f"examples/problems/{m}.py has no page docs/problems/{m}.md" for m in modules - pages),
        *(f"docs/problems/{p}.md has no module examples/problems/{p}.py" for p in pages - modules),
    ]


def test_discovery_finds_every_problem_module_and_each_has_a_page():
    on_disk = {p.stem for p in (ROOT / "src" / "examples" / "problems").glob("*.py")} - {"__init__"}
    assert set(problem_names()) == {name for name in on_disk if not name.startswith("_")}
    assert mismatches(set(problem_names()), page_names()) == []
    problems = all_problems()
    assert [p.name for p in problems] == sorted(
        problem_names(), key=lambda n: load_problem(n).position
    )
    assert [p.position for p in problems] == sorted({p.position for p in problems})
    for problem in problems:
        assert problem.page == f"problems/{problem.name}"
        assert getattr(
            importlib.import_module(f"examples.problems.{problem.name}"), problem.name
        ) is (problem.reference)
    assert set(examples.problems.PROBLEMS) == set(problem_names())


def test_a_module_without_a_page_or_a_page_without_a_module_is_caught():
    assert mismatches({"a", "b"}, {"b", "c"}) == [
        "examples/problems/a.py has no page docs/problems/a.md",
        "docs/problems/c.md has no module examples/problems/c.py",
    ]


def test_the_problems_index_lists_them_all_through_discovery():
    index = (PAGES / "index.md").read_text()
    assert "all_problems()" in index  # the table comes from discovery
    assert re.search(r"```\{toctree\}\n:hidden:\n:glob:\n\n\*\n```", index)


def test_the_problems_index_lists_the_checkers_lines_in_order_as_they_run(capsys):
    """How checking works lists one item per line of output, in the order printed; the first six
    stop the run when they fail; the residuals line compares the first input only."""
    from examples.check import check_function
    from examples.problems._check_names import check_names
    from examples.problems._checks import prepare, standard_checks
    from examples.problems.checkpoint_dot_policy import without_checkpoint

    index = (PAGES / "index.md").read_text()
    listed = re.findall(r"^(\d+)\. `(\w+)`:", index, flags=re.M)
    assert [name for _, name in listed] == check_names()
    assert [int(n) for n, _ in listed] == list(range(1, len(check_names()) + 1))
    assert "When one of the first six fails, the checks after it\nare skipped" in index
    problem = load_problem("checkpoint_dot_policy")
    prepared = prepare(problem, 0)
    fatal = [name for name, is_fatal, _ in standard_checks(problem, jnp.sin, prepared) if is_fatal]
    assert ["load", *fatal] == check_names()[:6]
    assert check_function("checkpoint_dot_policy", without_checkpoint, seed=0) == 1
    lines = capsys.readouterr().out.splitlines()
    residuals = next(line for line in lines if line.startswith("FAIL  residuals"))
    labels = [case.label for case in prepared.cases]
    assert len(set(labels)) > 1
    assert [label for label in labels if f"({label})" in residuals] == labels[:1]


@pytest.fixture
def extra_problem_dir(tmp_path, monkeypatch):
    """A folder on ``examples.problems.__path__``, for modules a test writes."""
    monkeypatch.setattr(examples.problems, "__path__", [*examples.problems.__path__, str(tmp_path)])
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("examples.problems.bogus")]:
        del sys.modules[name]


def test_a_module_that_declares_no_problem_fails_discovery(extra_problem_dir):
    (extra_problem_dir / "bogus_empty.py").write_text("X = 1\n")
    assert "bogus_empty" in problem_names()
    assert "bogus_empty" in mismatches(set(problem_names()), page_names())[0]
    with pytest.raises(DiscoveryError, match="declares no PROBLEM"):
        load_problem("bogus_empty")
    with pytest.raises(DiscoveryError):
        all_problems()


def test_a_module_named_otherwise_than_its_problem_fails_discovery(extra_problem_dir):
    source = Path(p1.__file__).read_text()
    (extra_problem_dir / "bogus_renamed.py").write_text(source)
    with pytest.raises(DiscoveryError, match="declares the problem 'checkpoint_dot_policy'"):
        load_problem("bogus_renamed")


def test_unknown_problem():
    with pytest.raises(KeyError):
        load_problem("remat_everything")


# --- the list of problems -------------------------------------------------------------------------


def test_the_checker_lists_six_problems_in_order(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("problems:\n", 1)[1].splitlines() if line]
    assert listed == [p.name for p in all_problems()]
    assert len(listed) >= 6
    assert listed[3:6] == ["scan_remat_body", "nnx_scan_remat", "save_only_named"]


@pytest.mark.parametrize("name", ["scan_remat_body", "nnx_scan_remat", "save_only_named"])
def test_the_problems_declare_their_structure(name):
    problem = load_problem(name)
    assert problem.inside_scan is (name != "save_only_named")
    assert problem.names == (("hidden",) if name == "save_only_named" else ())


# --- remat sites, names, jit inlined, under both implementations ----------------------------------


def _mode(under_remat3):
    return remat3(True) if under_remat3 else contextlib.nullcontext()


def _layer(h, wb):
    w, b = wb
    return jnp.tanh(h @ w + b), None


def _scan(layer):
    def f(ws, bs, x):
        h, _ = jax.lax.scan(layer, x, (ws, bs))
        return jnp.sum(h**2)

    return f


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_remat_sites_look_inside_jit_and_count_nesting(under_remat3):
    with _mode(under_remat3):
        double = jax.jit(jax.checkpoint(jax.checkpoint(p1._pipeline), policy=DOTS))
        sites = remat_sites(jax.make_jaxpr(double)(*p1.page_inputs(n=2, d=3)).jaxpr)
        assert sorted(s.depth for s in sites) == [0, 1]
        assert all(s.products == 2 for s in sites)
        assert remat_sites(jax.make_jaxpr(p1._pipeline)(*p1.page_inputs(n=2, d=3)).jaxpr) == []


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_remat_sites_know_whether_they_sit_in_a_scan_or_around_one(under_remat3):
    args = p4.page_inputs()
    with _mode(under_remat3):
        (inside,) = remat_sites(jax.make_jaxpr(_scan(jax.checkpoint(_layer)))(*args).jaxpr)
        (around,) = remat_sites(jax.make_jaxpr(jax.checkpoint(_scan(_layer)))(*args).jaxpr)
        jitted = jax.jit(_scan(jax.checkpoint(_layer)))
        (in_jit,) = remat_sites(jax.make_jaxpr(jitted)(*args).jaxpr)
    assert inside.within == ("scan",)
    assert (inside.contains("scan"), inside.products) == (0, 1)
    assert around.within == ()
    assert (around.contains("scan"), around.products) == (1, 1)
    assert in_jit.within[-1] == "scan"
    assert in_jit.within[0] in {"jit", "pjit"}


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_checkpoint_names_are_found_under_either_implementation(under_remat3):
    w1, w2, x = p6.make_cases(np.random.default_rng(0))[0].args
    with _mode(under_remat3):
        jaxpr = jax.make_jaxpr(p6.save_only_named)(w1, w2, x).jaxpr
        primitives = primitive_counts(jaxpr)
    (site,) = remat_sites(jaxpr)
    assert checkpoint_names(jaxpr) == {"hidden": 1}
    assert checkpoint_names(site.jaxpr) == {"hidden": 1}
    # What the name traces to is what differs: the primitive `name`, or a hi primitive.
    assert ("name" in primitives) is (not under_remat3)
    unnamed = jax.make_jaxpr(dots_problem.checkpoint_dot_policy)(*dots_problem.page_inputs(2, 3))
    assert checkpoint_names(unnamed.jaxpr) == {}


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_jit_inlined_lists_the_values_inside_jit_and_keeps_the_scan(under_remat3):
    args = p4.page_inputs()
    with _mode(under_remat3):
        fn = _scan(jax.checkpoint(_layer))
        plain = residual_listing(fn, *args)
        jitted = residual_listing(jax.jit(fn), *args)
        np.testing.assert_allclose(jit_inlined(jax.jit(fn), *args)(*args), fn(*args), rtol=1e-6)
        with jax.disable_jit():
            unrolled = saved_residuals(fn, *args)
    kinds = sorted((r.kind, r.type_str) for r in plain.excluding_arguments())
    assert kinds == sorted((r.kind, r.type_str) for r in jitted.excluding_arguments())
    assert ("output", "f32[4,8,4]") in kinds  # one carry per layer, stacked: the scan stays
    assert not any(r.kind == "jitted" for r in jitted)
    # jax.disable_jit would unroll the scan into one value per layer.
    assert len(unrolled.excluding_arguments()) > len(plain.excluding_arguments())


# --- policy comparison ----------------------------------------------------------------------------


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_compare_policy_by_identity_and_by_behaviour(under_remat3):
    with _mode(under_remat3):
        assert compare_policy(DOTS, DOTS)[0]
        # dots_saveable also keeps products with a batch dimension: the probe tells them apart.
        ok, detail = compare_policy(jax.checkpoint_policies.dots_saveable, DOTS)
        assert not ok
        assert "found dots_saveable" in detail
        assert not compare_policy(None, DOTS)[0]
        assert compare_policy(None, None)[0]
        assert compare_policy(NOTHING, None)[0]
        assert not compare_policy("dots_with_no_batch_dims_saveable", DOTS)[0]


def test_a_policy_function_of_ones_own_is_judged_by_what_this_jax_does_with_it():
    """A wrapper is another object: the default implementation calls it, so it keeps what the
    policy it wraps keeps. Under jax_remat3, JAX 0.10.2 (for one) does not call it and keeps
    nothing; JAX 0.12 calls it. The checker's verdict follows what this JAX does, in this run."""

    def wrapper(*args, **kwargs):
        return DOTS(*args, **kwargs)

    ok, detail = compare_policy(wrapper, DOTS)
    assert ok
    assert "another object" in detail
    if not remat3_available():
        pytest.skip("this JAX has no jax_remat3")
    args = p1.page_inputs(n=2, d=3)
    with remat3(True):
        ok, detail = compare_policy(wrapper, DOTS)
        kept = saved_residuals(jax.checkpoint(p1._pipeline, policy=wrapper), *args)
        by_dots = saved_residuals(jax.checkpoint(p1._pipeline, policy=DOTS), *args)
    if len(kept.excluding_arguments()) == 0:  # this remat3 recomputes everything instead
        assert remat3_ignores_function_policies()
        assert not ok
        assert "under jax_remat3, JAX does not call a policy written as a function" in detail
    else:  # this remat3 calls the function, as remat2 does
        assert not remat3_ignores_function_policies()
        assert residual_signature(kept) == residual_signature(by_dots)
        assert ok, detail
        assert "another object" in detail


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_compare_policy_tells_names_policies_apart(under_remat3):
    required = P.save_only_these_names("hidden")
    names = ("hidden",)
    with _mode(under_remat3):
        assert compare_policy(P.save_only_these_names("hidden"), required, names=names)[0]
        for wrong, text in (
            (P.save_only_these_names("Hidden"), "save_only_these_names('Hidden')"),
            (P.save_only_these_names(("hidden",)), "save_only_these_names(('hidden',))"),
            (P.save_any_names_but_these("hidden"), "save_any_names_but_these('hidden')"),
            (NOTHING, "nothing_saveable"),
            (DOTS, "dots_with_no_batch_dims_saveable"),
            (None, "no policy"),
        ):
            ok, detail = compare_policy(wrong, required, names=names)
            assert not ok, text
            assert text in detail, detail
        # A second name that the probe carries (as a program's other names) is another policy;
        # one that no value carries keeps the same values, so it passes, and the checker says why.
        extra = P.save_only_these_names("hidden", OTHER_NAME)
        assert not compare_policy(extra, required, names=names)[0]
        ok, detail = compare_policy(P.save_only_these_names("hidden", "x"), required, names=names)
        assert ok
        assert "another object, but it keeps exactly what" in detail
        # Without the problem's names on the probe, a names policy that keeps another name
        # would look like nothing_saveable; with them it does not.
        assert not compare_policy(P.save_only_these_names("other"), required, names=names)[0]


def test_policy_names_read_like_the_call_that_made_them():
    assert policy_name(P.save_only_these_names("b", "a")) == "save_only_these_names('a', 'b')"
    assert policy_name(P.save_any_names_but_these("x")) == "save_any_names_but_these('x')"
    assert policy_name(DOTS) == "dots_with_no_batch_dims_saveable"


# --- residual signatures --------------------------------------------------------------------------


@pytest.mark.skipif(not remat3_available(), reason="this JAX has no jax_remat3")
def test_residual_signature_is_the_same_under_both_implementations():
    """What the reference keeps, as the residuals check compares it, does not depend on the
    implementation, although the listings may name the arguments differently."""
    args = p1.page_inputs(n=2, d=3)
    listings = {}
    for on in (False, True):
        with remat3(on):
            # jax.checkpoint picks its implementation when it wraps, so wrap inside the block.
            direct = jax.checkpoint(p1._pipeline, policy=DOTS)
            listings[on] = (
                saved_residuals(p1.checkpoint_dot_policy, *args),
                saved_residuals(direct, *args),
            )
    for two, three in zip(listings[False], listings[True], strict=True):
        assert residual_signature(two) == residual_signature(three)
        # The primitive of each kept value counts: both keep the two products.
        assert sorted(k[2] for k in residual_signature(two).elements() if k[0] == "output") == [
            "dot_general",
            "dot_general",
        ]
    # A checkpointed function differentiated directly: remat2 names its arguments; remat3 named
    # them args[0], ... on JAX 0.10.2 and by name on JAX 0.12. The signature ignores the names.
    two, three = listings[False][1], listings[True][1]
    assert [r.detail for r in two if r.kind == "argument"] == ["w1", "w2", "x"]
    assert [r.detail for r in three if r.kind == "argument"] in (
        ["w1", "w2", "x"],
        ["args[0]", "args[1]", "args[2]"],
    )
    assert all(k[2] is None for k in residual_signature(three) if k[0] == "argument")


# --- the placement check --------------------------------------------------------------------------


def _placement(problem, fn, *args):
    return place(problem, jax.make_jaxpr(fn)(*args).jaxpr)


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_placement_in_a_scan(under_remat3):
    problem = p4.PROBLEM
    args = p4.page_inputs()

    def loop(ws, bs, x):
        h = x
        for i in range(ws.shape[0]):
            h, _ = jax.checkpoint(_layer)(h, (ws[i], bs[i]))
        return jnp.sum(h**2)

    def checkpoint_on_the_loss(ws, bs, x):
        h, _ = jax.lax.scan(_layer, x, (ws, bs))
        return jax.checkpoint(lambda h: jnp.sum(h**2))(h)

    with _mode(under_remat3):
        right = _placement(problem, _scan(jax.checkpoint(_layer)), *args)
        both = _placement(problem, jax.checkpoint(_scan(jax.checkpoint(_layer))), *args)
        no_scan = _placement(problem, loop, *args)
        outside = _placement(problem, checkpoint_on_the_loss, *args)
        nothing = _placement(problem, _scan(_layer), *args)
    assert right.ok
    assert len(right.placed) == 1
    assert "sits in the scan's body" in right.detail
    assert "none surrounds the scan" in right.detail
    # A checkpoint in the body and one around the scan: the one around fails it, the policy of
    # the one inside is still judged.
    assert not both.ok
    assert "surrounds the whole scan" in both.detail
    assert len(both.placed) == 1
    assert "nested inside another" not in both.detail
    assert not no_scan.ok
    assert "no scan in the traced function" in no_scan.detail
    assert no_scan.placed == ()
    assert "no scan" in no_scan.no_policy_reason
    assert not outside.ok
    assert "the checkpoint (" in outside.detail
    assert ") sits outside the scan; checkpoint the function the scan applies" in outside.detail
    assert not nothing.ok
    assert "no checkpoint in the traced function" in nothing.detail


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_placement_with_names(under_remat3):
    problem = p6.PROBLEM
    args = p6.make_cases(np.random.default_rng(0))[0].args

    def named_outside(w1, w2, x):
        x = checkpoint_name(x, "hidden")  # outside the checkpoint, which has both products
        return jax.checkpoint(lambda w1, w2, x: jnp.sum((jnp.tanh(x @ w1) @ w2) ** 2))(w1, w2, x)

    def named_otherwise(w1, w2, x):
        def f(w1, w2, x):
            return jnp.sum((jnp.tanh(checkpoint_name(x @ w1, "pre")) @ w2) ** 2)

        return jax.checkpoint(f)(w1, w2, x)

    with _mode(under_remat3):
        right = _placement(problem, p6.save_only_named, *args)
        outside = _placement(problem, named_outside, *args)
        otherwise = _placement(problem, named_otherwise, *args)
    assert right.ok
    assert "with the value named 'hidden' inside it" in right.detail
    assert not outside.ok
    assert "named outside the checkpoint, where its policy cannot see it" in outside.detail
    assert not otherwise.ok
    assert "no value inside the checkpoint is named 'hidden' (the names in it: 'pre')" in (
        otherwise.detail
    )
    # The checkpoint is there around the products: its policy can still be judged.
    assert len(otherwise.placed) == 1


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_a_name_is_compared_by_the_primitive_that_computed_its_value(under_remat3):
    from examples.problems._kept import named_difference, named_values

    w, x = jnp.ones((3, 4)), jnp.ones((2, 3))

    def on_product(w, x):
        return jnp.sum(jnp.tanh(checkpoint_name(x @ w, "h")))

    def on_tanh(w, x):
        return jnp.sum(checkpoint_name(jnp.tanh(x @ w), "h"))

    def on_input(w, x):
        return jnp.sum(checkpoint_name(x, "h") @ w)

    with _mode(under_remat3):
        product = named_values(jax.jit(jax.checkpoint(on_product)), w, x)
        tanh = named_values(jax.checkpoint(on_tanh), w, x)
        argument = named_values(on_input, w, x)
    assert product == {("h", "dot_general"): 1}
    assert tanh == {("h", "tanh"): 1}
    assert argument == {("h", "an input"): 1}
    assert named_difference(product, product) is None
    assert named_difference(tanh, product) == (
        "your `h` names the output of tanh, where the reference names the output of dot_general"
    )
    assert named_difference({("other", "tanh"): 1}, product) is None  # not the same name
