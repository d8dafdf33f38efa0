"""examples.reference.releases: the tests' outcome from a JUnit report, records written, replaced
and loaded or refused clearly, the command line, and the machine a record names."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from examples.reference import releases
from examples.tools import recorded

# --- the tests' outcome, from a real pytest report ------------------------------------------------


def _junit_of(folder: Path, *args: str) -> Path:
    """Run pytest on ``args`` in ``folder`` (a fresh process) and return its JUnit report."""
    report = folder / "junit.xml"
    # The folder is pytest's rootdir, whatever holds it: a temporary folder inside a checkout
    # (nox puts TMPDIR under .nox/) would otherwise take the checkout's pyproject.toml as its
    # configuration and report test ids relative to the checkout.
    (folder / "pytest.ini").write_text("[pytest]\n")
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args[1:],
         f"--junitxml={report}", args[0]],
        cwd=folder, capture_output=True, check=False, timeout=120,
    )  # fmt: skip
    return report


def test_junit_summary_counts_and_reasons(tmp_path):
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "def test_ok(): pass\n"
        "def test_bad(): assert 1 == 2\n"
        "def test_heading(tmp_path): assert 0, f'Checking {tmp_path}\\nPASS a\\nFAIL  b: slow'\n"
        "@pytest.mark.skip(reason='not here')\n"
        "def test_skipped(): pass\n"
    )
    summary = releases.summarize_junit(_junit_of(tmp_path, "test_sample.py"))
    assert summary["passed"] == 1
    failed, heading = summary["failed"]
    assert failed["test"].endswith("::test_bad")
    assert "assert 1 == 2" in failed["reason"]
    assert failed["reason"].endswith("(at test_sample.py:3)")
    # The cause under a heading is kept; the machine's temporary folder is not.
    assert "FAIL  b: slow" in heading["reason"]
    assert str(tmp_path) not in heading["reason"]
    assert summary["skipped"] == [{"test": summary["skipped"][0]["test"], "reason": "not here"}]


def test_a_failure_that_stops_outside_the_repository_names_no_machine_path(tmp_path):
    """A timeout stops in the standard library: the place is shown under ``<python>``."""
    stdlib = Path(sys.base_prefix) / "lib" / "selectors.py"
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite><testcase classname="tests.test_x" name="test_slow">'
        '<error message="failed on setup with &quot;Failed: Timeout&quot;">'
        f"E   Failed: Timeout\n\n{stdlib}:415: Failed</error></testcase></testsuite></testsuites>"
    )
    (entry,) = releases.summarize_junit(report)["failed"]
    assert sys.base_prefix not in entry["reason"]
    assert entry["reason"].endswith("(at <python>/lib/selectors.py:415)")


# --- records: writing, replacing, loading ---------------------------------------------------------


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


# --- the machine ----------------------------------------------------------------------------------


def test_the_record_names_the_machine_its_seconds_come_from():
    import os

    here = releases.machine()
    assert here["cpus"] == os.cpu_count()
    assert isinstance(here["cpu"], str)
    assert here["cpu"]
    if hasattr(os, "getloadavg"):
        assert here["load_15min"] >= 0


@pytest.mark.parametrize(
    "reason",
    [
        "needs flax 9: a reason",
        # pytest writes the reason in double quotes when it holds an apostrophe (the jax 0.5.0
        # record lost three such reasons to a reader that expected single quotes)
        "the decoder's tests need flax 0.11",
        """both 'single' and "double" quotes""",
    ],
)
def test_a_file_skipped_whole_is_its_path_with_pytests_reason(tmp_path, reason):
    (tmp_path / "tests" / "howto").mkdir(parents=True)
    (tmp_path / "tests" / "howto" / "test_whole.py").write_text(
        f"import pytest\npytest.skip({reason!r}, allow_module_level=True)\n"
    )
    (entry,) = releases.summarize_junit(_junit_of(tmp_path, "tests", "-o", "addopts="))["skipped"]
    assert entry == {"test": "tests/howto/test_whole.py", "reason": reason}
    assert releases.shown(entry) == (entry["test"], entry["reason"])


def test_older_records_of_a_file_skipped_whole_are_shown_with_its_path():
    # Records written before the reader above hold a malformed id and no reason.
    old = {"test": ".py::tests.howto.test_nnx_training", "reason": "collection skipped"}
    test, reason = releases.shown(old)
    assert test == "tests/howto/test_nnx_training.py"
    assert (Path(__file__).resolve().parents[2] / test).exists()
    assert "keeps no reason" in reason
    for record in releases.load_all():  # every entry the page shows names a test file
        for item in record["tests"]["skipped"] + record["tests"]["failed"]:
            assert releases.shown(item)[0].split("::")[0].endswith(".py")
