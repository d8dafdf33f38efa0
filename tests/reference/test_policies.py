"""examples.reference.policies: the catalogue is complete, and each policy saves what it says."""

from __future__ import annotations

import inspect
import json
import re

import jax
import numpy as np
import pytest
from reference._helpers import ARGS, computed, describe

from examples import explorer
from examples.reference import offload_policies as offload
from examples.reference import policies, policy_differences
from examples.tools import jaxprs
from examples.tools.models import SIZES
from examples.tools.recorded import DATA

P = jax.checkpoint_policies
RELEASES = DATA / "releases"
KINDS = {"policy", "factory", "combinator", "offload", "class"}


# --- the catalogue against the installed JAX ---------------------------------------------------


def test_catalogue_describes_every_public_policy_of_the_installed_jax():
    assert policies.undocumented_policies() == set(), (
        "the installed JAX has checkpoint policies the reference page does not describe: "
        "add them to examples.reference.policies.CATALOGUE"
    )


def test_catalogue_names_only_policies_jax_has():
    assert policies.missing_from_jax() == set()


def test_completeness_check_notices_a_new_policy(monkeypatch):
    monkeypatch.setattr(P, "brand_new_saveable", lambda *_, **__: True, raising=False)
    assert policies.undocumented_policies() == {"brand_new_saveable"}


def test_aliases_are_found_by_identity():
    assert policies.ALIASES == {
        "checkpoint_dots": "dots_saveable",
        "checkpoint_dots_with_no_batch_dims": "dots_with_no_batch_dims_saveable",
    }
    for alias, canonical in policies.ALIASES.items():
        assert getattr(P, alias) is getattr(P, canonical)
        assert policies.BY_NAME[alias].alias_of == canonical
    assert P.dots_saveable is not P.dots_with_no_batch_dims_saveable
    others = set(policies.BY_NAME) - set(policies.ALIASES)
    assert all(policies.BY_NAME[n].alias_of is None for n in others)


def test_kinds_match_the_signatures():
    for entry in policies.present():
        assert entry.kind in KINDS, entry.name
        params = inspect.signature(entry.obj).parameters
        if entry.kind == "factory":
            (only,) = params.values()
            assert only.kind is inspect.Parameter.VAR_POSITIONAL, entry.name
        elif entry.kind == "offload":
            assert {"offload_src", "offload_dst"} <= set(params), entry.name
        elif entry.kind == "combinator":
            assert len(params) == 2, entry.name
        if entry.kind != "class":
            assert callable(entry.build()), entry.name


def test_the_release_records_say_which_releases_exported_the_classes():
    exporting = policies.releases_exporting_classes()
    assert "0.11.2" in exporting  # the record of jax 0.11.2 lists all three names
    exported_here = all(hasattr(P, cls) for cls in policies.POLICY_CLASSES)
    recorded = [p.name[len("jax-") : -len(".json")] for p in RELEASES.glob("jax-*.json")]
    factories = {"save_only_these_names", "save_any_names_but_these"}
    for path in RELEASES.glob("jax-*.json"):  # "the factories, which every recorded release has"
        assert factories <= set(json.loads(path.read_text("utf-8"))["facts"]["policy_names"])
    if jax.__version__ in recorded:
        assert (jax.__version__ in exporting) == exported_here


def test_exported_policy_classes_are_what_the_factories_build():
    for cls, is_instance in policies.classes_behind_factories().items():
        assert is_instance, cls
    optional = {e.name for e in policies.CATALOGUE if e.optional}
    assert optional == set(policies.POLICY_CLASSES)


# --- what each policy keeps on the common model ------------------------------------------------


def test_everything_saveable_keeps_what_no_checkpoint_keeps():
    assert describe(policies.residuals(None, *ARGS)) == describe(
        policies.residuals(P.everything_saveable, *ARGS)
    )


def test_nothing_saveable_keeps_no_computed_value():
    listing = policies.residuals(P.nothing_saveable, *ARGS)
    assert len(listing.excluding_arguments()) == 0
    assert [r.argument for r in listing] == ["w1", "w2", "x"]


def test_dots_saveable_keeps_all_four_products():
    kept = computed(P.dots_saveable)
    assert [r.primitive for r in kept] == ["dot_general"] * 4
    # The batched product of hidden with itself has a (b, s, t) output.
    assert (2, 4, 4) in [r.shape for r in kept]


def test_dots_with_no_batch_dims_keeps_only_the_weight_products():
    kept = computed(P.dots_with_no_batch_dims_saveable)
    assert [r.primitive for r in kept] == ["dot_general"] * 2
    assert all(r.shape == (2, 4, 8) for r in kept)
    assert (2, 4, 4) not in [r.shape for r in kept]
    # The two it keeps are among those dots_saveable keeps.
    assert set(describe(kept)) < set(describe(computed(P.dots_saveable)))


def test_name_policies_keep_exactly_the_named_values():
    assert [r.name for r in computed(P.save_only_these_names("hidden"))] == ["hidden"]
    assert [r.name for r in computed(P.save_any_names_but_these("hidden"))] == ["pre_activation"]
    both = computed(P.save_only_these_names(*policies.NAMES))
    assert sorted(r.name for r in both) == sorted(policies.NAMES)
    assert all(r.kind == "named" for r in both)
    assert len(computed(P.save_only_these_names("no_such_name"))) == 0


def test_save_anything_except_these_names_matches_what_the_page_says():
    kept = computed(P.save_anything_except_these_names("hidden"))
    everything = computed(P.everything_saveable)
    if policies.excluded_names_honoured():
        assert "hidden" not in [r.name for r in kept]
        assert len(kept) < len(everything)
    else:
        assert describe(kept) == describe(everything)


def test_an_honoured_exclusion_leaves_the_same_buffer_listed_under_its_input():
    everything = computed(P.everything_saveable)
    honoured = computed(policies.excluding_names("hidden"))
    assert "hidden" not in [r.name for r in honoured]
    (named,) = [r for r in everything if r.name == "hidden"]
    (tanh,) = [r for r in honoured if r.primitive == "tanh"]
    assert tanh.shape == named.shape
    rest = [r.describe() for r in everything if r != named]
    if policy_differences.alias_listed_with_its_input():
        # The tanh output was already listed next to the name: only the duplicate entry goes.
        assert "tanh" in [r.primitive for r in everything]
        assert sorted(describe(honoured)) == sorted(rest)
        assert honoured.nbytes == everything.nbytes - named.nbytes
    else:
        # The tanh output takes the named value's place: the same bytes listed.
        assert "tanh" not in [r.primitive for r in everything]
        assert sorted(describe(honoured)) == sorted([*rest, tanh.describe()])
        assert honoured.nbytes == everything.nbytes
    # Excluding a name the model does not use changes nothing.
    assert describe(computed(policies.excluding_names("nope"))) == describe(everything)


def test_save_from_both_policies_refuses_an_offload_policy_next_to_a_bool_policy():
    both = P.save_from_both_policies(
        P.save_only_these_names("hidden"), P.offload_dot_with_no_batch_dims("device", "pinned_host")
    )
    with pytest.raises(ValueError, match="should be a boolean"):
        jax.grad(jax.checkpoint(policies.model, policy=both))(*ARGS)


def test_save_from_both_policies_is_the_union():
    both = computed(policies.BY_NAME["save_from_both_policies"].build())
    dots = computed(P.dots_with_no_batch_dims_saveable)
    named = computed(P.save_only_these_names("hidden"))
    assert sorted(describe(both)) == sorted(describe(dots + named))


def test_under_vmap_with_per_stage_weights_no_product_lacks_a_batch_dimension():
    no_batch = policies.stacked_residuals(P.dots_with_no_batch_dims_saveable)
    assert len(no_batch.excluding_arguments()) == 0
    every_dot = policies.stacked_residuals(P.dots_saveable).excluding_arguments()
    assert [r.primitive for r in every_dot] == ["dot_general"] * 4
    assert all(r.shape[0] == 2 for r in every_dot)  # the stage axis


def test_under_vmap_with_shared_weights_the_weight_products_are_still_kept():
    shared = policies.stacked_residuals(P.dots_with_no_batch_dims_saveable, shared_weights=True)
    kept = shared.excluding_arguments()
    alone = computed(P.dots_with_no_batch_dims_saveable)
    # The same two products as without vmap, each with the stage axis in front.
    assert [r.primitive for r in kept] == ["dot_general"] * 2
    assert [r.shape for r in kept] == [(2, *r.shape) for r in alone]
    assert kept.nbytes == 2 * alone.nbytes


def test_offload_policies_list_host_residuals():
    kept = computed(policies.BY_NAME["offload_dot_with_no_batch_dims"].build())
    assert len(kept) == 2
    assert all(r.on_host and r.primitive == "device_put" for r in kept)
    mixed = computed(policies.BY_NAME["save_and_offload_only_these_names"].build())
    assert [r.name for r in mixed if r.kind == "named"] == ["pre_activation"]
    assert sum(r.on_host for r in mixed) == 1
    # The type string says "<host>" only on releases whose abstract values carry a memory space
    # (jax 0.7 onwards); older ones say it only in the device_put (examples.tools.compat).
    if hasattr(jax.core.ShapedArray((1,), np.float32), "memory_space"):
        assert all("<host>" in r.type_str for r in kept)
        assert ["<host>" in r.type_str for r in mixed] == [r.on_host for r in mixed]
    else:
        assert not any("<host>" in r.type_str for r in kept + mixed)


def test_offload_names_must_not_overlap():
    with pytest.raises(ValueError, match="intersect"):
        P.save_and_offload_only_these_names(
            names_which_can_be_saved=["hidden"],
            names_which_can_be_offloaded=["hidden"],
            offload_src="device",
            offload_dst="pinned_host",
        )


# --- gradients do not depend on the policy -------------------------------------------------------


def _all_policies():
    built = {e.name: e.build for e in policies.present() if e.kind != "class"}
    built["keep_big_products(40)"] = lambda: policies.keep_big_products(40)
    built["names_to_host('hidden')"] = lambda: offload.names_to_host("hidden")
    return built


ALL_POLICIES = _all_policies()


def _finite_difference(argnum, index, eps=1e-6):
    args = [np.asarray(a, np.float64) for a in ARGS]
    plus, minus = [a.copy() for a in args], [a.copy() for a in args]
    plus[argnum][index] += eps
    minus[argnum][index] -= eps
    return (policies.model_float64(*plus) - policies.model_float64(*minus)) / (2 * eps)


ENTRIES = [(0, (0, 0)), (0, (3, 5)), (0, (7, 1)), (1, (0, 0)), (1, (2, 6)), (1, (7, 7))]
FLOAT64_GRADS = {(argnum, index): _finite_difference(argnum, index) for argnum, index in ENTRIES}


@pytest.mark.parametrize("name", sorted(ALL_POLICIES))
def test_gradients_do_not_depend_on_the_policy(name):
    with jax.default_matmul_precision("highest"):
        expected = jax.grad(policies.model, argnums=(0, 1))(*ARGS)
        f = jax.checkpoint(policies.model, policy=ALL_POLICIES[name]())
        got = jax.jit(jax.grad(f, argnums=(0, 1)))(*ARGS)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    scale = max(float(np.max(np.abs(g))) for g in got)
    for (argnum, index), reference in FLOAT64_GRADS.items():
        np.testing.assert_allclose(
            float(got[argnum][index]), reference, rtol=1e-4, atol=1e-5 * scale
        )


def test_model_against_float64():
    with jax.default_matmul_precision("highest"):
        value = policies.model(*ARGS)
    np.testing.assert_allclose(value, policies.model_float64(*ARGS), rtol=1e-5)


# --- custom policies -----------------------------------------------------------------------------


def test_custom_policy_threshold():
    sizes = sorted(r.shape for r in computed(policies.keep_big_products(1)))
    assert sizes == [(2, 4, 4), (2, 4, 8), (2, 4, 8), (2, 4, 8)]
    assert [r.shape for r in computed(policies.keep_big_products(40))] == [(2, 4, 8)] * 3
    assert len(computed(policies.keep_big_products(1000))) == 0


# --- what the page says beyond the listings -----------------------------------------------------


def test_a_custom_policy_function_keeps_less_under_jax_remat3():
    if not jaxprs.remat3_available():
        pytest.skip(f"jax {jax.__version__} has no jax_remat3 flag")

    def keep_everything(*_, **__):
        return True

    default = computed(keep_everything)
    with jaxprs.remat3():
        flagged = computed(keep_everything)
    assert len(flagged) < len(default)
    assert flagged.nbytes < default.nbytes


def test_jax_docstrings_say_what_the_page_quotes():
    # jax 0.10.2's dots_with_no_batch_dims_saveable is a dataclass instance with a generated
    # docstring; there only the offloading variant carries the sentence.
    doc = " ".join(jax.checkpoint.__doc__.split())
    assert "inside a :func:`~jax.lax.scan`, this CSE prevention mechanism is unnecessary" in doc
    docs = [P.dots_with_no_batch_dims_saveable.__doc__, P.offload_dot_with_no_batch_dims.__doc__]
    if not any(docs):  # the page prints the installed docstrings, whatever they are
        pytest.skip(f"jax {jax.__version__}'s policies carry no docstrings (None)")
    assert any("useful heuristic for transformers" in (d or "") for d in docs)


# --- the summary table ----------------------------------------------------------------------


def test_summary_rows_cover_the_catalogue():
    rows = policies.summary()
    expected = [e.name for e in policies.present() if e.kind != "class"]
    assert [r.policy for r in rows[1:]] == expected
    by_name = {r.policy: r for r in rows}
    assert by_name["nothing_saveable"].count == 0
    assert by_name[policies.NO_CHECKPOINT].nbytes == by_name["everything_saveable"].nbytes
    assert by_name["dots_saveable"].nbytes > by_name["dots_with_no_batch_dims_saveable"].nbytes
    assert by_name["save_only_these_names"].count == 1
    table = policies.summary_table(rows)
    assert "`checkpoint_dots` (= `dots_saveable`)" in table.column("policy")
    assert len(table.rows) == len(rows)
    assert table.column("count") == [str(r.count) for r in rows]


def test_relation_words():
    assert policies.relation(2, 1) == "more than"
    assert policies.relation(1, 1) == "the same as"
    assert policies.relation(0, 1) == "less than"


# --- everything_saveable is not a free way to switch remat off -----------------------------------


def test_everything_saveable_is_not_the_program_without_checkpoint():
    """The reference page: same residuals as no checkpoint, but a program that costs no less."""
    plain, every = explorer.measure(
        SIZES["small"], [explorer.NO_REMAT, "everything_saveable"], time_steps=False
    )
    assert every.residual_bytes_per_layer == pytest.approx(plain.residual_bytes_per_layer, abs=16)
    assert every.flops >= plain.flops
    assert every.temp_bytes >= plain.temp_bytes
    assert (every.flops, every.temp_bytes) != (plain.flops, plain.temp_bytes)


def test_committed_gpu_runs_show_everything_saveable_costing_more():
    runs = [r for r in explorer.load_all(policies_data()) if r.runinfo["backend"] == "gpu"]
    assert runs
    for gpu in runs:
        rows = {r.policy: r for r in gpu.results}
        plain, every = rows[explorer.NO_REMAT], rows["everything_saveable"]
        assert every.temp_bytes > plain.temp_bytes
        assert every.step_time_s > plain.step_time_s
        said = explorer.everything_saveable_on(gpu)
        assert "needed more than the compiled memory of no checkpoint" in said
        # Slower only where the run recorded spreads (the H200's, not the H100's).
        if every.timing is None:
            assert "does not call it slower" in said
        else:
            assert ("step was slower" in said) is (every.timing.compare(plain.timing) == "slower")


def policies_data():
    return explorer.RUNS


def test_checkpoint_policies_is_a_namespace_not_a_module():
    # The policy reference and the first problem: `from jax.checkpoint_policies import ...` fails.
    import types

    assert isinstance(jax.checkpoint_policies, types.SimpleNamespace)
    with pytest.raises(ModuleNotFoundError):
        exec("from jax.checkpoint_policies import nothing_saveable", {})


def test_the_page_names_five_kinds_of_entry():
    # The page: "five kinds", each described; every kind the catalogue uses is among them.
    import typing

    kinds = typing.get_args(policies.Kind)
    assert kinds == ("policy", "factory", "combinator", "offload", "class")
    assert {e.kind for e in policies.CATALOGUE} == set(kinds)


def test_an_offloaded_value_is_listed_as_the_device_put_that_moves_it():
    # The page's glued sentence: <host> in the type where the release's types carry a memory
    # space. Whether JAX gives the device_put a source location is the release's (none on jax
    # 0.12; jax 0.7.2 gives one), and the page reads it off the listing; where it gives one, it
    # names a file and line.
    kept = computed(policies.BY_NAME["offload_dot_with_no_batch_dims"].build())
    assert {r.primitive for r in kept} == {"device_put"}
    assert all(r.source is None or re.search(r"\.py:\d+", r.source) for r in kept)


def test_import_jax_alone_does_not_make_ad_checkpoint_an_attribute():
    # The page's comment on `import jax.ad_checkpoint`, in a fresh interpreter.
    import subprocess
    import sys

    code = "import jax\ntry:\n    jax.ad_checkpoint\nexcept AttributeError:\n    print('absent')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "absent"
