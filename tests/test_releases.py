"""examples.releases and examples.release_table: the facts agree with the installed JAX, the
records load or fail clearly, and the page's data covers the release matrix."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import re
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import pytest
from builtsite import ROOT

from examples import jaxprs, recorded, release_facts, release_table, releases, tutorial
from examples.residuals import saved_residuals

P = jax.checkpoint_policies


@pytest.fixture(scope="module")
def facts():
    return release_facts.collect_facts()


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
    """The outcome of ``call`` measured here, independently of examples.releases."""
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


# --- the tests' outcome, from a real pytest report ------------------------------------------------


def test_junit_summary_counts_and_reasons(tmp_path):
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert 1 == 2\n"
        "def test_heading(tmp_path): assert 0, f'Checking {tmp_path}\\nPASS a\\nFAIL  b: slow'\n"
        "@pytest.mark.skip(reason='not here')\n"
        "def test_skipped(): pass\n"
    )
    report = tmp_path / "junit.xml"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={report}",
            "test_sample.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        timeout=120,
    )
    summary = releases.summarize_junit(report)
    assert summary["passed"] == 1
    failed, heading = summary["failed"]
    assert failed["test"].endswith("::test_bad")
    assert "assert 1 == 2" in failed["reason"]
    assert failed["reason"].endswith("(at test_sample.py:3)")
    # The cause under a heading is kept; the machine's temporary folder is not.
    assert "FAIL  b: slow" in heading["reason"]
    assert str(tmp_path) not in heading["reason"]
    assert summary["skipped"] == [{"test": summary["skipped"][0]["test"], "reason": "not here"}]


# --- records: writing, replacing, loading ---------------------------------------------------------


@pytest.fixture(scope="module")
def record(facts):
    return {
        "schema": releases.SCHEMA,
        "runinfo": {
            "jax": "0.7.2",
            "jaxlib": "0.7.2",
            "flax": "0.12.0",
            "python": "3.11.7",
            "backend": "cpu",
            "device": "cpu",
        },
        "facts": copy.deepcopy(facts),
        "machine": {"cpus": 2, "cpu": "some CPU", "load_15min": 1.5},
        "tests": {"passed": 3, "failed": [], "skipped": []},
        "seconds": {"tests": 10.0},
    }


def test_write_refuses_to_overwrite_and_replace_says_what_changed(tmp_path, record):
    assert releases.write(record, tmp_path) == "wrote jax-0.7.2.json (new)"
    with pytest.raises(FileExistsError, match="--replace"):
        releases.write(record, tmp_path)
    same = releases.write(record, tmp_path, replace=True)
    assert same.startswith("replaced jax-0.7.2.json")
    assert "the same facts" in same
    changed = copy.deepcopy(record)
    changed["facts"]["remat_primitive"] = "remat3000"
    message = releases.write(changed, tmp_path, replace=True)
    assert "remat_primitive" in message
    assert "remat3000" in message
    assert releases.load(tmp_path / "jax-0.7.2.json")["facts"]["remat_primitive"] == "remat3000"
    assert [p.name for p in tmp_path.iterdir()] == ["jax-0.7.2.json"]  # no draft left behind


def test_a_malformed_record_never_replaces_a_good_one(tmp_path, record):
    releases.write(record, tmp_path)
    before = (tmp_path / "jax-0.7.2.json").read_text()
    broken = copy.deepcopy(record)
    del broken["facts"]["remat3"]
    with pytest.raises(releases.ReleasesDataError, match="facts lack remat3"):
        releases.write(broken, tmp_path, replace=True)
    assert (tmp_path / "jax-0.7.2.json").read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["jax-0.7.2.json"]


def test_a_record_that_cannot_be_read_is_replaced_and_the_reason_said(tmp_path, record):
    (tmp_path / "jax-0.7.2.json").write_text('{"schema": "jax-remat-guide/releases/0"}')
    message = releases.write(record, tmp_path, replace=True)
    assert message.startswith("replaced jax-0.7.2.json")
    assert "could not be read: jax-0.7.2.json: schema is 'jax-remat-guide/releases/0'" in message
    assert releases.load(tmp_path / "jax-0.7.2.json")["facts"] == record["facts"]


def test_records_are_read_through_examples_recorded(record):
    assert issubclass(releases.ReleasesDataError, recorded.RecordError)
    assert recorded.folder("releases") == releases.DATA


def _broken(record, change):
    data = copy.deepcopy(record)
    change(data)
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("facts"), "'facts' must be a dict"),
        (lambda d: d.update(schema="jax-remat-guide/releases/1"), "schema is"),
        (lambda d: d["runinfo"].pop("jaxlib"), "runinfo lacks 'jaxlib'"),
        (lambda d: d["runinfo"].pop("device"), "runinfo lacks 'device'"),
        (lambda d: d["facts"].pop("remat3"), "facts lack remat3"),
        (lambda d: d.update(tests={"passed": "3"}), "'tests' needs"),
        (lambda d: d.update(seconds=[]), "'seconds' must be a dict"),
        (lambda d: d.pop("machine"), "'machine' must be a dict"),
    ],
)
def test_malformed_records_are_clear_errors(tmp_path, record, change, message):
    path = tmp_path / "jax-0.7.2.json"
    path.write_text(json.dumps(_broken(record, change)))
    with pytest.raises(releases.ReleasesDataError, match=message) as err:
        releases.load(path)
    assert str(err.value).startswith("jax-0.7.2.json: ")


def test_files_that_are_not_records(tmp_path, record):
    (tmp_path / "jax-0.7.2.json").write_text("{not json")
    with pytest.raises(releases.ReleasesDataError, match=r"jax-0\.7\.2\.json: not JSON"):
        releases.load_all(tmp_path)
    (tmp_path / "jax-0.7.2.json").write_text("[]")
    with pytest.raises(releases.ReleasesDataError, match=r"jax-0\.7\.2\.json: schema is None"):
        releases.load_all(tmp_path)
    (tmp_path / "jax-0.7.2.json").unlink()
    (tmp_path / "jax-0.8.3.json").write_text(json.dumps(record))
    with pytest.raises(releases.ReleasesDataError, match=r"must be named jax-0\.7\.2\.json"):
        releases.load_all(tmp_path)
    with pytest.raises(releases.ReleasesDataError, match="no release data folder"):
        releases.load_all(tmp_path / "absent")
    with pytest.raises(releases.ReleasesDataError, match="not a JAX release number"):
        releases.release_key("0.7.x")


def test_command_line_rejects_a_bad_seconds_argument():
    with pytest.raises(SystemExit) as exit_:
        releases.main(["--seconds", "tests=soon"])
    assert exit_.value.code == 2


# --- rendering ------------------------------------------------------------------------------------


def _series(record, values):
    out = []
    for version, (key, value) in values:
        data = copy.deepcopy(record)
        data["runinfo"]["jax"] = version
        data["facts"][key] = value
        out.append(data)
    return out


def test_runs_and_changes_name_the_releases_around_a_change(record):
    series = _series(
        record,
        [
            ("0.6.2", ("remat_is_checkpoint", True)),
            ("0.7.2", ("remat_is_checkpoint", True)),
            ("0.8.3", ("remat_is_checkpoint", False)),
        ],
    )
    runs = release_table.runs(series, "remat_is_checkpoint")
    assert [(r.releases, r.value) for r in runs] == [("0.6.2–0.7.2", True), ("0.8.3", False)]
    (change,) = [c for c in release_table.changes(series) if c.fact == "remat_is_checkpoint"]
    assert (change.before, change.after, change.what) == ("0.7.2", "0.8.3", "yes → no")


def test_a_list_change_names_what_was_added_and_removed(record):
    series = _series(
        record, [("0.6.2", ("policy_names", ["a", "b"])), ("0.7.2", ("policy_names", ["b", "c"]))]
    )
    (change,) = [c for c in release_table.changes(series) if c.fact == "policy_names"]
    assert change.what == "added `c`; removed `a`"


def test_tables_cover_every_fact_and_release(record):
    series = _series(record, [("0.6.2", ("remat3", None)), ("0.7.2", ("remat3", "hi"))])
    table = release_table.facts_table(series)
    assert len(table.rows) == len(release_table.FACTS) == len(releases.FACT_KEYS)
    assert {f.key for f in release_table.FACTS} == set(releases.FACT_KEYS)
    row = table.rows[[f.key for f in release_table.FACTS].index("remat3")]
    assert "no such flag (0.6.2)" in row[1]
    assert "after 0.6.2, by 0.7.2" in row[2]
    assert release_table.releases_table(series).column("jax") == ["`0.6.2`", "`0.7.2`"]
    assert release_table.releases_with(series, "remat3", "hi") == "0.7.2"
    assert release_table.releases_with(series, "remat3", "lo") == "no release of the matrix"
    assert release_table.total_seconds(series) == 20.0
    assert release_table.releases_table(series).column("in all") == ["10 s", "10 s"]


def test_machine_text_names_the_cpus_and_the_load_range(record):
    series = _series(record, [("0.6.2", ("remat3", None)), ("0.7.2", ("remat3", None))])
    series[1]["machine"] = {**series[1]["machine"], "load_15min": 4.0}
    assert release_table.machine_text(series) == (
        "2 CPUs (some CPU), 15-minute load average 1.5 to 4.0 as each release finished"
    )
    series[1]["machine"]["load_15min"] = None
    assert release_table.machine_text(series) == "2 CPUs (some CPU)"


# --- the committed record of this release --------------------------------------------------------


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


# --- the links of the facts table -----------------------------------------------------------------


def _slug(title: str) -> str:
    """MyST's heading anchor (``myst_heading_anchors``) of a heading's text, backticks dropped."""
    return re.sub(r"[^\w\- ]", "", title.replace("`", "").strip().lower().replace(" ", "-"))


def test_every_fact_links_to_a_heading_that_exists():
    """Each link of the facts table names a page of the site and one of its headings."""
    here = ROOT / "docs" / "reference"
    for fact in release_table.FACTS:
        assert fact.pages, fact.key
        for title, link in fact.pages:
            page, _, anchor = link.partition("#")
            text = (here / page).read_text(encoding="utf-8")
            headings = re.findall(r"^#{1,3} (.+)$", text, re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, (fact.key, title, link)
            assert f"[{title}]({link})" in fact.cell()


def test_the_record_names_the_machine_its_seconds_come_from():
    import os

    here = releases.machine()
    assert here["cpus"] == os.cpu_count()
    assert isinstance(here["cpu"], str)
    assert here["cpu"]
    if hasattr(os, "getloadavg"):
        assert here["load_15min"] >= 0
