"""One view per release of the matrix: what a reader pinned to that release sees otherwise.

For each record of :mod:`examples.reference.releases`, a page ``docs/reference/releases/jax-X.md``
(written by :func:`write_pages`, ``python -m examples.reference.release_views``; a test keeps
the committed pages equal to :func:`page`) shows on one screen the facts whose value there
differs from the newest release's, the pages whose outputs those facts change, and the tests the
release skipped, one row per reason. Reasons are grouped by :func:`wording`: the tests word one
reason in many ways (the release number in the sentence, "lacks" or "has no"), so the 564
distinct (test, reason) pairs of the skip table come down to a few reasons each release has.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from examples.reference.release_table import FACTS, Fact, _difference, _names, release, runs, show
from examples.reference.releases import file_name, load_all, shown
from examples.tools.display import Align, Table

_LEFT: list[Align] = ["left"]

# --- one wording per reason ----------------------------------------------------------------------

#: Reasons that say one thing in several ways, and the one wording each is shown with.
_SAME_REASON: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^(?:this JAX )?(?:has no|lacks|no) (?:the )?jax_remat3(?: flag)?$"),
        "this JAX has no jax_remat3 flag",
    ),
    (
        re.compile(r"^the compiler for '[^']+' is not installed here \(see `nox -s plans`\)$"),
        "the compiler for a GPU or TPU target is not installed here (see `nox -s plans`)",
    ),
    (
        re.compile(r"^needs a CUDA GPU; JAX's default backend here is '\w+'$"),
        "needs a CUDA GPU (none on the machine that ran the matrix)",
    ),
)
_LEADING_RELEASE = re.compile(r"^jax \d+(?:\.\d+)+(?=['’:\s/])")


def wording(reason: str) -> str:
    """The one wording of a skip reason: the release's own number at the start of the sentence
    becomes "this JAX" (the view is of one release), and reasons listed in ``_SAME_REASON`` take
    their common wording."""
    text = _LEADING_RELEASE.sub("this JAX", reason.strip())
    for pattern, common in _SAME_REASON:
        if pattern.match(text):
            return common
    return text


def skipped_by_reason(record: dict[str, Any]) -> list[tuple[str, int, list[str]]]:
    """``(reason, number of tests, test files)`` for each reason the release skipped tests for,
    most tests first."""
    tests: dict[str, list[str]] = {}
    for item in record["tests"]["skipped"]:
        test, reason = shown(item)
        tests.setdefault(wording(reason), []).append(test)
    rows = [
        (reason, len(found), sorted({t.split("::", 1)[0] for t in found}))
        for reason, found in tests.items()
    ]
    return sorted(rows, key=lambda r: (-r[1], r[0]))


def skipped_table(record: dict[str, Any]) -> Table:
    """The release's skipped tests, one row per reason: how many, and in which test files."""
    rows = [
        [reason, n, ", ".join(f"`{name}`" for name in files)]
        for reason, n, files in skipped_by_reason(record)
    ]
    return Table(["reason", "tests", "in"], rows, align=["left", "right", "left"])


def skipped_overview(records: Sequence[dict[str, Any]]) -> Table:
    """Every release's skipped tests by reason: one row per reason, one column per release."""
    counts = [Counter({r: n for r, n, _ in skipped_by_reason(rec)}) for rec in records]
    reasons = sorted({r for c in counts for r in c}, key=lambda r: (-sum(c[r] for c in counts), r))
    rows = [[reason, *(c[reason] or "" for c in counts)] for reason in reasons]
    header = ["reason", *(f"[{release(rec)}]({link(rec)})" for rec in records)]
    return Table(header, rows, align=_LEFT + ["right"] * len(records))


# --- facts that differ from the newest release ---------------------------------------------------


def newest(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return records[-1]


def differing_facts(records: Sequence[dict[str, Any]], record: dict[str, Any]) -> list[Fact]:
    """The facts whose value on ``record``'s release differs from the newest release's."""
    latest = newest(records)["facts"]
    return [f for f in FACTS if record["facts"][f.key] != latest[f.key]]


def _first_differing(key: str, record: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    """The release after which the fact took its newest value, for "changed in" (the newest run's
    first release)."""
    return runs(records, key)[-1].first


_RELATIVE_LINK = re.compile(r"\]\((?![a-z]+:|#|/)([^)]+)\)")


def from_view(markdown: str) -> str:
    """Markdown written for a page in docs/reference/ (the facts' links), with its relative
    links made to work from a view one folder below."""
    return _RELATIVE_LINK.sub(r"](../\1)", markdown)


def _side_by_side(key: str, mine: Any, theirs: Any) -> tuple[str, str]:
    """A fact's value on this release and on the newest, as two cells that differ: lists of names
    say which names each lacks, the seven answers of the jax_remat3 guide only those that
    differ."""
    if key == "remat3_points" and mine is not None and theirs is not None:
        from examples.notes.remat3 import POINTS

        pairs = [
            (f"{point}: {a}", f"{point}: {b}")
            for (point, _, _), a, b in zip(POINTS, mine, theirs, strict=True)
            if a != b
        ]
        return "; ".join(p[0] for p in pairs), "; ".join(p[1] for p in pairs)
    if _names(key, mine, theirs):
        return (
            f"{show(key, mine)}: {_difference(key, theirs, mine, ('also', 'not'))}",
            f"{show(key, theirs)}: {_difference(key, mine, theirs, ('also', 'not'))}",
        )
    return show(key, mine), show(key, theirs)


def facts_table(records: Sequence[dict[str, Any]], record: dict[str, Any]) -> Table:
    """One row per fact that differs: this release's value, the newest's, and where it changed
    (links from a view's folder)."""
    latest = newest(records)
    rows = []
    for fact in differing_facts(records, record):
        mine, theirs = record["facts"][fact.key], latest["facts"][fact.key]
        rows.append(
            [
                from_view(fact.cell()),
                *_side_by_side(fact.key, mine, theirs),
                _first_differing(fact.key, record, records),
            ]
        )
    header = ["fact", f"jax {release(record)}", f"jax {release(latest)}", "newest value since"]
    return Table(header, rows, align=_LEFT * 4)


def pages_changed(records: Sequence[dict[str, Any]], record: dict[str, Any]) -> list[str]:
    """The pages (as Markdown links, from a view's folder) that teach a fact whose value differs
    on this release: the pages whose outputs read otherwise there."""
    seen: dict[str, str] = {}
    for fact in differing_facts(records, record):
        for title, target in fact.pages:
            seen.setdefault(target.split("#", 1)[0], title)
    return [from_view(f"[{title}]({target})") for target, title in seen.items()]


def summary(records: Sequence[dict[str, Any]], record: dict[str, Any]) -> str:
    """One paragraph: versions, the tests, and how many facts differ from the newest release."""
    info, tests = record["runinfo"], record["tests"]
    latest = newest(records)
    n = len(differing_facts(records, record))
    if record is latest:
        differ = "It is the newest release of the matrix, the one the other views compare with."
    else:
        differ = (
            f"Of the {len(FACTS)} facts the matrix measures, {n} differ from jax "
            f"{release(latest)}"
            + (
                f"; they change what these pages show: {', '.join(pages_changed(records, record))}."
                if n
                else "."
            )
        )
    return (
        f"jax {info['jax']} with jaxlib {info['jaxlib']} and flax {info['flax']}, Python "
        f"{info['python']}, {info['backend']} backend: {tests['passed']} tests passed, "
        f"{len(tests['failed'])} failed and {len(tests['skipped'])} were skipped. {differ}"
    )


# --- the pages -----------------------------------------------------------------------------------

FOLDER = "releases"  #: under docs/reference/


def slug(record: dict[str, Any]) -> str:
    """The page's name: ``jax-0-6-2`` (a dot in a page's name would cut it short where a tool
    takes what follows the last dot for a file suffix, as the theme's notebook download does)."""
    return "jax-" + release(record).replace(".", "-")


def link(record: dict[str, Any], here: str = "reference") -> str:
    """The view's page, relative to a page in docs/reference/ (``here="reference"``) or to
    another view (``here="view"``)."""
    return f"{FOLDER}/{slug(record)}.md" if here == "reference" else f"{slug(record)}.md"


#: The page's text: generated from the committed records, so that every release has the same
#: view and no page runs a kernel for what the records already hold (a test keeps each page equal
#: to :func:`page`; ``python -m examples.reference.release_views`` rewrites them).
TEMPLATE = """<!-- generated by `python -m examples.reference.release_views` from
src/examples/data/releases/{record_file}; do not edit by hand -->

(release-{version_label})=
# jax {version}

{summary}

## What differs from the newest release

Each fact is measured on each release by the matrix; the links go to the pages that teach it.

{facts}

## Tests skipped on jax {version}, by reason

{skipped}

Every release of the matrix, and how the matrix runs, are on
[Across JAX releases](../releases.md).
"""


def record_of(records: Sequence[dict[str, Any]], version: str) -> dict[str, Any]:
    (found,) = [r for r in records if release(r) == version]
    return found


def page(record: dict[str, Any], records: Sequence[dict[str, Any]] | None = None) -> str:
    """The MyST text of ``record``'s view, its tables rendered from the records."""
    records = load_all() if records is None else records
    version = release(record)
    facts = (
        facts_table(records, record)._repr_markdown_()
        if differing_facts(records, record)
        else "None: this is the newest release of the matrix."
    )
    return TEMPLATE.format(
        record_file=file_name(version),
        version=version,
        version_label=version.replace(".", "-"),
        summary=summary(records, record),
        facts=facts.strip(),
        skipped=skipped_table(record)._repr_markdown_().strip(),
    )


def write_pages(docs: Path, records: Sequence[dict[str, Any]] | None = None) -> list[Path]:
    """Write every release's view under ``docs/reference/releases/`` and remove views of
    releases the matrix no longer holds."""
    records = load_all() if records is None else records
    folder = docs / "reference" / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for rec in records:
        path = folder / f"{slug(rec)}.md"
        path.write_text(page(rec, records), encoding="utf-8")
        written.append(path)
    for stale in set(folder.glob("jax-*.md")) - set(written):
        stale.unlink()
    return written


def index_list(records: Sequence[dict[str, Any]]) -> str:
    """The list of views for the releases page: one link per release, newest first."""
    latest = newest(records)
    items = []
    for rec in reversed(records):
        n = len(differing_facts(records, rec))
        what = "the newest" if rec is latest else f"{n} facts differ"
        items.append(f"[jax {release(rec)}]({link(rec)}) ({what})")
    return " · ".join(items)


if __name__ == "__main__":  # pragma: no cover - rewrites the pages
    write_pages(Path(__file__).resolve().parents[3] / "docs")
