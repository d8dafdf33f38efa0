"""What each JAX release does with remat, measured: the facts of the page "Across JAX releases".

Each fact is read off the installed JAX by running code, never typed in. The release matrix
(``nox -s tests-jax``) runs this module in each release's environment after the examples' tests,
with the tests' JUnit report (``--junit``) and the folder of records (``--out``):

    python -m examples.reference.releases --out src/examples/data/releases --junit J.xml --replace

which writes one JSON record per release, ``jax-<version>.json``: the versions, the facts, and
the outcome of the tests (failures and skips with their reasons). The records are committed
under ``src/examples/data/releases/`` and read and written through :mod:`examples.tools.recorded`,
like the site's other recorded measurements. They carry no dates, so a build from the same files
renders the same page. An existing record is replaced only with ``--replace``, which the matrix
passes on purpose (a release's record is its latest run), and the command says that it replaced
the file and what changed. :mod:`examples.reference.release_table` renders the records.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from examples.reference.release_facts import FACTS, collect_facts
from examples.tools import recorded, runinfo
from examples.tools.paths import scrub_paths

#: Version 2 added "machine" (where the seconds were measured) and the "facts" seconds.
SCHEMA = "jax-remat-guide/releases/2"

# --- the tests' outcome --------------------------------------------------------------------------


def summarize_junit(path: str | Path) -> dict[str, Any]:
    """Counts, and each failure and skip with its reason, from pytest's ``--junitxml`` file.

    A reason is the first line of pytest's message, and for a failure the line of the test file
    where it failed (``tests/test_x.py:148``). A file skipped whole when collected is its path,
    with the reason pytest gave (its message says only "collection skipped").
    """
    root = ET.parse(path).getroot()
    summary: dict[str, Any] = {"passed": 0, "failed": [], "skipped": []}
    for case in root.iter("testcase"):
        classname, name = case.get("classname") or "", case.get("name") or ""
        test = f"{classname.replace('.', '/')}.py::{name}" if classname else _path_of(name)
        problem = next((c for c in case if c.tag in ("failure", "error", "skipped")), None)
        if problem is None:
            summary["passed"] += 1
            continue
        message = problem.get("message") or problem.text or ""
        if message == "collection skipped":
            message = _collection_skip_reason(problem.text or "") or message
        lines = message.strip().splitlines()
        reason = lines[0][:200] if lines else "(no message)"
        # A message whose first line is a heading (the checker's) names the cause further down.
        cause = next((line for line in lines[1:] if re.search(r"\bFAIL\b|Error\b", line)), None)
        reason += f": {cause.strip()[:200]}" if cause else ""
        if problem.tag != "skipped":
            where = re.findall(r"^(\S+?\.py:\d+): ", problem.text or "", re.MULTILINE)
            reason += f" (at {where[-1]})" if where else ""
        # The place too: a timeout stops in the standard library, outside the repository.
        reason = scrub_paths(reason, roots=[Path.cwd()])
        entry = {"test": test, "reason": reason}
        summary["skipped" if problem.tag == "skipped" else "failed"].append(entry)
    return summary


def _collection_skip_reason(text: str) -> str | None:
    """The reason of a file skipped whole: pytest writes the repr of ``(path, line, "Skipped:
    reason")``, in double quotes where the reason holds an apostrophe, so it is read as Python."""
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(value, tuple) and value and isinstance(value[-1], str):
        return value[-1].removeprefix("Skipped: ")
    return None


def _path_of(module: str) -> str:
    return module.replace(".", "/") + ".py"


def shown(item: dict[str, str]) -> tuple[str, str]:
    """``(test, reason)`` of a failed or skipped entry as the page shows it. Records written
    before :func:`summarize_junit` read collection-level skips hold ``".py::tests.x.test_y"`` and
    the bare "collection skipped": shown as the file's path, and a reason that says so."""
    test, reason = item["test"], item["reason"] or "(no message)"
    if test.startswith(".py::"):
        test = _path_of(test.removeprefix(".py::"))
    if reason == "collection skipped":
        reason = "the whole file was skipped when collected (this record keeps no reason)"
    return test, reason


# --- records ----------------------------------------------------------------------------------

#: Where the matrix commits the records: ``src/examples/data/releases/``, shipped with the package.
DATA = recorded.folder("releases")


class ReleasesDataError(recorded.RecordError):
    """A release record that cannot be read: the message names the file and what is wrong."""


_FIELDS: dict[str, type] = {"machine": dict, "facts": dict, "tests": dict, "seconds": dict}
FACT_KEYS = tuple(FACTS)


def record(
    junit: str | Path | None = None, seconds: dict[str, float] | None = None
) -> dict[str, Any]:
    """The record of the installed release: versions, facts, tests' outcome, seconds taken, and
    the machine that took them."""
    import time

    start = time.perf_counter()
    facts = collect_facts()
    took = {**(seconds or {}), "facts": round(time.perf_counter() - start)}
    return {
        "schema": SCHEMA,
        "runinfo": runinfo.collect().as_dict(),
        "machine": machine(),
        "facts": facts,
        "tests": summarize_junit(junit) if junit else {"passed": 0, "failed": [], "skipped": []},
        "seconds": took,
    }


def machine() -> dict[str, Any]:
    """The machine the seconds were measured on: CPU count and model, and how busy it was (the
    15-minute load average when the record is written; above the CPU count, processes waited)."""
    import os
    import platform

    model = runinfo.cpu_model(platform.processor() or platform.machine())
    load = os.getloadavg()[2] if hasattr(os, "getloadavg") else None
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "load_15min": None if load is None else round(load, 1),
    }


def file_name(release: str) -> str:
    return f"jax-{release}.json"


def release_key(release: str) -> tuple[int, ...]:
    """``"0.12.0.1"`` -> ``(0, 12, 0, 1)``, for sorting releases."""
    try:
        return tuple(int(part) for part in release.split("."))
    except ValueError:
        raise ReleasesDataError(f"{release!r} is not a JAX release number") from None


def _check(data: dict[str, Any], where: str, name: str) -> dict[str, Any]:
    """What :func:`examples.tools.recorded.read` leaves to each kind: a release record's own
    parts."""
    for key in ("jax", "jaxlib", "flax", "python", "backend"):
        if not isinstance(data["runinfo"].get(key), str):
            raise ReleasesDataError(f"{where}: runinfo lacks '{key}'")
    absent = [key for key in FACT_KEYS if key not in data["facts"]]
    if absent:
        raise ReleasesDataError(f"{where}: facts lack {', '.join(absent)}")
    tests = data["tests"]
    if not isinstance(tests.get("passed"), int) or not all(
        isinstance(tests.get(k), list) for k in ("failed", "skipped")
    ):
        raise ReleasesDataError(f"{where}: 'tests' needs 'passed' (a number), 'failed', 'skipped'")
    release = data["runinfo"]["jax"]
    release_key(release)
    if name != file_name(release):
        raise ReleasesDataError(
            f"{where}: holds jax {release}, so it must be named {file_name(release)}"
        )
    return data


def _read(path: Path, name: str) -> dict[str, Any]:
    data, _ = recorded.read(path, {SCHEMA: 2}, ReleasesDataError, fields=_FIELDS)
    return _check(data, path.name, name)


def load(path: str | Path) -> dict[str, Any]:
    """One record, checked; :class:`ReleasesDataError` names the file and the problem."""
    path = Path(path)
    return _read(path, path.name)


def load_all(folder: str | Path = DATA) -> list[dict[str, Any]]:
    """Every record in ``folder`` (the committed ones by default), oldest release first."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ReleasesDataError(f"no release data folder at {folder}")
    records = recorded.load_all(folder, load)
    return sorted(records, key=lambda r: release_key(r["runinfo"]["jax"]))


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two records of one release, one line each (seconds left out)."""
    lines = [
        f"{key}: {old['facts'].get(key)!r} -> {new['facts'].get(key)!r}"
        for key in FACT_KEYS
        if old["facts"].get(key) != new["facts"].get(key)
    ]
    lines += [
        f"runinfo.{key}: {old['runinfo'].get(key)} -> {value}"
        for key, value in new["runinfo"].items()
        if old["runinfo"].get(key) != value
    ]
    if old["tests"] != new["tests"]:

        def counts(t: dict[str, Any]) -> str:
            return f"{t['passed']} passed, {len(t['failed'])} failed"

        lines.append(f"tests: {counts(old['tests'])} -> {counts(new['tests'])}")
    return lines


def write(data: dict[str, Any], folder: str | Path = DATA, replace: bool = False) -> str:
    """Write ``data`` as the record of its release; return what was done, in one sentence.

    A new release's record is written with :func:`examples.tools.recorded.write_new`. An existing
    one is replaced only with ``replace=True``, on purpose: the matrix's record of a release is its
    latest run there, and the sentence returned says that it replaced the file and what changed.
    Either way the new record is first written beside it and read back through the same checks
    as a committed one, so a malformed record never takes the place of a good one.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    release = str(data.get("runinfo", {}).get("jax", "unknown"))
    name = file_name(release)
    path = folder / name
    if path.exists() and not replace:
        raise FileExistsError(
            f"{path} exists; pass --replace to replace the record of jax {release} "
            "(nothing else is touched)"
        )
    draft = folder / f".{name}.new"
    draft.unlink(missing_ok=True)
    recorded.write_new(draft, data)
    try:
        _read(draft, name)
        if not path.exists():
            recorded.write_new(path, data)
            return f"wrote {name} (new)"
        try:
            old: dict[str, Any] | None = load(path)
        except ReleasesDataError as err:  # written by an older schema, say: replaced all the same
            old, unreadable = None, str(err)
        draft.replace(path)  # the one place a committed record is replaced: on purpose
    finally:
        draft.unlink(missing_ok=True)
    done = f"replaced {name}, the record of the release this run measured"
    if old is None:
        return f"{done} (the old one could not be read: {unreadable})"
    what = changes(old, data)
    return (
        f"{done}: the same facts and tests as before"
        if not what
        else f"{done}; changed: " + "; ".join(what)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.reference.releases", description=__doc__
    )
    parser.add_argument(
        "--out",
        help="folder of the records, src/examples/data/releases for the committed ones "
        "(left out: print the record)",
    )
    parser.add_argument("--junit", help="pytest --junitxml report of this release's tests")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="replace this release's record if there is one (the matrix does, on purpose)",
    )
    parser.add_argument(
        "--seconds", action="append", default=[], metavar="STEP=N", help="time a step took"
    )
    args = parser.parse_args(argv)
    seconds: dict[str, float] = {}
    for item in args.seconds:
        step, _, value = item.partition("=")
        try:
            seconds[step] = float(value)
        except ValueError:
            parser.error(f"--seconds takes STEP=NUMBER, not {item!r}")
    with contextlib.redirect_stdout(io.StringIO()):  # nothing the facts print reaches the output
        data = record(args.junit, seconds)
    if args.out is None:
        print(json.dumps(data, indent=1, sort_keys=True))
        return 0
    try:
        print(write(data, args.out, replace=args.replace))
    except (FileExistsError, ReleasesDataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
