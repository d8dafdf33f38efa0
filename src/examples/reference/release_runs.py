"""The page "Across JAX releases": how each release's run of the matrix went, as tables and text.

The records of :mod:`examples.reference.releases` hold, for each release, the examples' tests
(passed, failed, skipped, with their reasons), the seconds each stage took and the machine it ran
on; these render them. What each release does with remat is :mod:`examples.reference.release_table`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from examples.reference.release_table import _LEFT, _RIGHT, release
from examples.reference.releases import shown
from examples.tools.display import Table, format_seconds


def _tests(record: dict[str, Any]) -> tuple[int, int, int]:
    t = record["tests"]
    return t["passed"], len(t["failed"]), len(t["skipped"])


def releases_table(records: Sequence[dict[str, Any]]) -> Table:
    """One row per release: versions, the examples' tests, and the time the matrix took."""
    rows = []
    for rec in records:
        info, (passed, failed, skipped) = rec["runinfo"], _tests(rec)
        seconds = rec["seconds"]
        rows.append(
            [
                f"`{info['jax']}`",
                f"`{info['jaxlib']}`",
                f"`{info['flax']}`",
                info["python"],
                info["backend"],
                passed,
                failed,
                skipped,
                format_seconds(seconds["tests"]) if "tests" in seconds else "n/a",
                format_seconds(release_seconds(rec)),
            ]
        )
    header = ["jax", "jaxlib", "flax", "Python", "backend"]
    header += ["passed", "failed", "skipped", "tests took", "in all"]
    return Table(header, rows, align=_LEFT * 5 + _RIGHT * 5)


def problems_table(records: Sequence[dict[str, Any]], which: str) -> Table:
    """Every failed (``which="failed"``) or skipped test with its reason, once, and the releases
    where it was so, in the records' order (a GPU test skipped on every release is one row, not
    one per release: the page stays short enough for a phone to lay out)."""
    where: dict[tuple[str, str], list[str]] = {}
    for rec in records:
        for item in rec["tests"][which]:
            where.setdefault(shown(item), []).append(f"`{release(rec)}`")
    every = len(records) > 1

    def jax(found: list[str]) -> str:
        return "every release" if every and len(found) == len(records) else ", ".join(found)

    rows = [[jax(found), f"`{test}`", reason] for (test, reason), found in where.items()]
    return Table(["jax", "test", "reason"], rows, align=_LEFT * 3)


def _file_of(test: str) -> str:
    return test.split("::", 1)[0]


def failures_by_file(records: Sequence[dict[str, Any]]) -> Table:
    """Failed tests counted per test file (rows) and release (columns), with a total row."""
    files = sorted({_file_of(i["test"]) for rec in records for i in rec["tests"]["failed"]})
    rows: list[list[Any]] = [
        [f"`{name}`"]
        + [sum(_file_of(i["test"]) == name for i in rec["tests"]["failed"]) for rec in records]
        for name in files
    ]
    rows.append(["all files", *(len(rec["tests"]["failed"]) for rec in records)])
    header = ["test file", *(f"`{release(rec)}`" for rec in records)]
    return Table(header, rows, align=_LEFT + _RIGHT * len(records))


def total_seconds(records: Sequence[dict[str, Any]]) -> float:
    """Seconds the matrix took over all releases: installing, testing and measuring, as recorded."""
    return float(sum(release_seconds(rec) for rec in records))


def release_seconds(record: dict[str, Any]) -> float:
    """Seconds one release's session took: its install, tests and facts, as recorded."""
    return float(sum(record["seconds"].values()))


def machine_text(records: Sequence[dict[str, Any]]) -> str:
    """``"2 CPUs (AMD EPYC), 15-minute load average 5.2 to 8.7"``: where the seconds were taken."""
    machines = sorted({(rec["machine"]["cpus"], rec["machine"]["cpu"]) for rec in records})
    text = " and ".join(f"{cpus} CPUs ({model})" for cpus, model in machines)
    loads = [rec["machine"]["load_15min"] for rec in records]
    if None in loads or not loads:
        return text
    low, high = min(loads), max(loads)
    span = f"{low:.1f}" if low == high else f"{low:.1f} to {high:.1f}"
    return f"{text}, 15-minute load average {span} as each release finished"
