"""The page "Across JAX releases": the release records of :mod:`examples.reference.releases` as
tables.

For every fact, the releases are grouped into runs that share one value, and a change is named
by the two releases of the matrix it falls between: the matrix holds the newest patch of each
minor release, so a change seen between 0.7.2 and 0.8.3 happened in one of 0.8.0 to 0.8.3.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from examples.tools.display import Align, Table, format_bytes

_LEFT: list[Align] = ["left"]
_RIGHT: list[Align] = ["right"]

# The pages that teach the facts, as links from docs/reference/releases.md. An anchor is the
# heading's slug (MyST's myst_heading_anchors); the build (-W) fails on one that does not exist.
_TUTORIAL = ("tutorial", "../tutorial/gradient-checkpointing.md")
_HOW = ("tutorial: how remat works", "../tutorial/how-remat-works.md")
_NOTES = ("migration notes", "../notes/new-checkpoint-implementation.md")
_POLICIES = ("policy reference", "policies.md")
_WRONG = ("how-to: when remat goes wrong", "../howto/when-remat-goes-wrong.md")
_MEMORY = ("how-to: measure memory", "../howto/measure-memory.md")
_REMAT3 = ("`jax_remat3` guide", "../notes/jax-remat3.md")


def _at(page: tuple[str, str], anchor: str) -> tuple[str, str]:
    return page[0], f"{page[1]}#{anchor}"


@dataclasses.dataclass(frozen=True)
class Fact:
    key: str  #: the key in a record's "facts"
    label: str  #: what the row says, Markdown
    #: ``(title, relative link)`` of each page that teaches it, the main one first
    pages: tuple[tuple[str, str], ...]

    def cell(self) -> str:
        """The label, then a link to each page that teaches it."""
        links = ", ".join(f"[{title}]({link})" for title, link in self.pages)
        return f"{self.label} ({links})"


FACTS: tuple[Fact, ...] = (
    Fact(
        "remat_primitive",
        "primitive `jax.checkpoint` traces to",
        (_at(_NOTES, "what-changed-and-when"),),
    ),
    Fact(
        "dots_residuals",
        "residuals of the tutorial's `f` under `dots_with_no_batch_dims_saveable`",
        (
            _at(_TUTORIAL, "policies-and-names"),
            _at(
                _POLICIES,
                "dots_with_no_batch_dims_saveable-alias-checkpoint_dots_with_no_batch_dims",
            ),
            _at(_MEMORY, "step-5-list-the-residuals-of-the-whole-model"),
        ),
    ),
    Fact(
        "policy_names",
        "names in `jax.checkpoint_policies`",
        (
            _at(_POLICIES, "at-a-glance"),
            _at(_POLICIES, "policy-classes-some-releases"),
            _at(_TUTORIAL, "the-policies-and-one-name-that-does-not-exist"),
        ),
    ),
    Fact(
        "ad_checkpoint_names",
        "names in `jax.ad_checkpoint`",
        (_at(_TUTORIAL, "policies-and-names"),),
    ),
    Fact(
        "remat_is_checkpoint",
        "`jax.remat is jax.checkpoint`",
        (_at(_NOTES, "jaxremat-is-not-jaxcheckpoint"),),
    ),
    Fact(
        "checkpoint_keywords",
        "keyword arguments `inspect.signature(jax.checkpoint)` shows (before 0.8.2 it shows the "
        "wrapped inner function's, which lack `concrete`; the outer one took it)",
        (_at(_NOTES, "checklist-for-upgrading-old-remat-code"),),
    ),
    Fact(
        "concrete_true",
        "`jax.checkpoint(f, concrete=True)`",
        (_at(_NOTES, "concrete-is-gone-whatever-its-value"),),
    ),
    Fact(
        "concrete_false",
        "`jax.checkpoint(f, concrete=False)`",
        (_at(_NOTES, "concrete-is-gone-whatever-its-value"),),
    ),
    Fact(
        "checkpoint_static_argnames",
        "`jax.checkpoint(f, static_argnames=...)`, `f` branching on that argument",
        (
            _at(_NOTES, "computing-with-static-arguments-while-tracing"),
            _at(_WRONG, "a-static-argument-raises-concretizationtypeerror"),
        ),
    ),
    Fact(
        "remat_static_argnames",
        "`jax.remat(f, static_argnames=...)`, the same `f`",
        (_at(_NOTES, "jaxremat-is-not-jaxcheckpoint"),),
    ),
    Fact(
        "except_names_refuses",
        "`save_anything_except_these_names('a')` refuses a value named `a`",
        (
            _at(_POLICIES, "save_anything_except_these_namesnames"),
            _at(_TUTORIAL, "the-policies-and-one-name-that-does-not-exist"),
        ),
    ),
    Fact(
        "except_names_bytes",
        "bytes kept for the tutorial's `f_named` under it, and under `everything_saveable`",
        (_at(_POLICIES, "save_anything_except_these_namesnames"),),
    ),
    Fact(
        "remat3",
        "`jax_remat3` flag, and the primitive `jax.checkpoint` traces to under it (its name; a "
        "printed jaxpr may show it otherwise, e.g. `RematTraced[...]`)",
        (_at(_REMAT3, "what-the-traced-program-looks-like"),),
    ),
    Fact(
        "tanh_kept",
        "what reverse mode keeps for `tanh` (JAX's listing, arguments left out)",
        (_at(_TUTORIAL, "what-the-forward-pass-keeps"),),
    ),
    Fact(
        "remat_prevent_cse",
        "how `jax.remat` declares `prevent_cse`",
        (_at(_NOTES, "jaxremat-is-not-jaxcheckpoint"),),
    ),
    Fact(
        "both_policies_with_offload",
        "`save_from_both_policies(nothing_saveable, offload_dot_with_no_batch_dims(...))`",
        (_at(_POLICIES, "save_from_both_policiespolicy_1-policy_2"),),
    ),
    Fact(
        "straight_line",
        "straight-line stack of 8 layers, one checkpoint each, under `jit`: products lowered → "
        "compiled (without checkpoints), compiled temporary memory against no checkpoints",
        (_at(_HOW, "straight-line-code-under-jit-what-survives-compilation"),),
    ),
    Fact(
        "remat3_points",
        "under `jax_remat3`, each point of the migration guide and this release's answer",
        (_at(_REMAT3, "each-point-on-each-release"),),
    ),
)


def release(record: dict[str, Any]) -> str:
    return str(record["runinfo"]["jax"])


# --- values as text ------------------------------------------------------------------------------


def _outcome(value: dict[str, Any]) -> str:
    text = {"raises": f"raises `{value.get('error')}`"}.get(value["outcome"], value["outcome"])
    return f"{text}, warns `{value['warning']}`" if value.get("warning") else text


def _listing(lines: Sequence[str]) -> str:
    """``"3 × output of dot_general"``: the computed residuals, the arguments left out."""
    what = Counter(line.split(" ", 1)[1] for line in lines if " from the argument " not in line)
    if not what:
        return "nothing computed"
    return "; ".join(f"{n} × `{words}`" if n > 1 else f"`{words}`" for words, n in what.items())


def show(key: str, value: Any) -> str:
    """One fact's value as a table cell."""
    if key == "dots_residuals":
        return _listing(value)
    if key == "remat3":
        return "no such flag" if value is None else f"flag present; primitive `{value}`"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "tanh_kept":
        return _listing(value)
    if key == "straight_line":
        return (
            f"{value['products_lowered']} → {value['products_compiled']} products "
            f"({value['products_without_checkpoint']}); memory ×{value['temp_vs_plain']:g}"
        )
    if key == "remat3_points":
        if value is None:
            return "no such flag"
        # Each answer beside its point: the record holds the answers in the guide's order.
        from examples.notes.remat3 import POINTS

        return "; ".join(
            f"{point}: {answer}" for (point, _, _), answer in zip(POINTS, value, strict=True)
        )
    if key == "except_names_bytes":
        mine, everything = value["except_a"], value["everything"]
        if mine == everything:
            return f"the same, {format_bytes(mine)}"
        return f"{format_bytes(mine)} vs. {format_bytes(everything)}"
    if isinstance(value, dict):
        return _outcome(value)
    if isinstance(value, list):
        return f"{len(value)} names"
    return f"`{value}`"


def _names(key: str, *values: Any) -> bool:
    """Whether a fact's values are lists of names (shown as counts), not listings."""
    listings = ("dots_residuals", "tanh_kept", "remat3_points")
    return key not in listings and all(isinstance(v, list) for v in values)


def _difference(
    key: str, before: Any, after: Any, words: tuple[str, str] = ("added", "removed")
) -> str:
    """What changed from ``before`` to ``after``: for names, those in each only, after ``words``."""
    if key == "remat3_points" and before is not None and after is not None:
        # Only the points whose answer changed: the seven answers side by side read as if all
        # had changed.
        from examples.notes.remat3 import POINTS

        changed = [
            f"{point}: {old} → {new}"
            for (point, _, _), old, new in zip(POINTS, before, after, strict=True)
            if old != new
        ]
        return "; ".join(changed) or "the same answers"
    if _names(key, before, after):
        added = [f"`{n}`" for n in after if n not in before]
        removed = [f"`{n}`" for n in before if n not in after]
        parts = [f"{words[0]} {', '.join(added)}"] * bool(added)
        parts += [f"{words[1]} {', '.join(removed)}"] * bool(removed)
        return "; ".join(parts)
    return f"{show(key, before)} → {show(key, after)}"


# --- runs and changes ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    """Consecutive releases of the matrix that agree on one fact."""

    first: str
    last: str
    value: Any

    @property
    def releases(self) -> str:
        return self.first if self.first == self.last else f"{self.first}–{self.last}"


def runs(records: Sequence[dict[str, Any]], key: str) -> list[Run]:
    """The records (oldest first) grouped into runs of equal value for fact ``key``."""
    found: list[Run] = []
    for rec in records:
        value = rec["facts"][key]
        if found and found[-1].value == value:
            found[-1] = dataclasses.replace(found[-1], last=release(rec))
        else:
            found.append(Run(release(rec), release(rec), value))
    return found


@dataclasses.dataclass(frozen=True)
class Change:
    fact: str
    before: str  #: the last release of the matrix with the old value
    after: str  #: the first release of the matrix with the new value
    what: str


def changes(records: Sequence[dict[str, Any]]) -> list[Change]:
    """Every change of every fact between consecutive releases of the matrix."""
    found = []
    for fact in FACTS:
        fact_runs = runs(records, fact.key)
        for old, new in itertools.pairwise(fact_runs):
            what = _difference(fact.key, old.value, new.value)
            found.append(Change(fact.key, old.last, new.first, what))
    return found


def releases_with(records: Sequence[dict[str, Any]], key: str, value: Any) -> str:
    """The releases of the matrix where fact ``key`` has ``value``: ``"0.8.3–0.12.0.1"``.

    For a page that prints a release-specific output, to say on which releases it holds.
    """
    found = [r.releases for r in runs(records, key) if r.value == value]
    return ", ".join(found) if found else "no release of the matrix"


def changed_in(change: Change) -> str:
    return f"after {change.before}, by {change.after}"


# --- the tables ----------------------------------------------------------------------------------


def facts_table(records: Sequence[dict[str, Any]]) -> Table:
    """One row per fact: its values over the releases, and where it changed."""
    by_fact: dict[str, list[Change]] = {}
    for change in changes(records):
        by_fact.setdefault(change.fact, []).append(change)
    rows = []
    for fact in FACTS:
        fact_runs = runs(records, fact.key)
        values = "; ".join(f"{show(fact.key, r.value)} ({r.releases})" for r in fact_runs)
        changed = (
            "; ".join(f"{changed_in(c)}: {c.what}" for c in by_fact.get(fact.key, []))
            or "no change"
        )
        rows.append([fact.cell(), values, changed])
    return Table(["fact", "value (releases)", "changed"], rows, align=_LEFT * 3)


def _there(key: str, there: Any, here: Any) -> str:
    """A release's value; where it and the building JAX's are lists of names, which differ."""
    changed = _names(key, there, here) and _difference(key, here, there, ("also", "not"))
    return f"{show(key, there)}: {changed}" if changed else show(key, there)


def differences(records: Sequence[dict[str, Any]], here: dict[str, Any]) -> Table:
    """Where a release of the matrix differs from ``here`` (the facts of the JAX that built the
    site): what a reader on that release sees instead of what the pages show."""
    rows = []
    for fact in FACTS:
        for run in runs(records, fact.key):
            if run.value != here[fact.key]:
                rows.append(
                    [
                        fact.cell(),
                        run.releases,
                        _there(fact.key, run.value, here[fact.key]),
                        show(fact.key, here[fact.key]),
                    ]
                )
    header = ["fact", "on jax", "that release gives", "the pages show"]
    return Table(header, rows, align=_LEFT * 4)


def changes_table(records: Sequence[dict[str, Any]]) -> Table:
    """One row per change of a fact: the fact (linked to its main page), where, and what."""
    by_key = {fact.key: fact for fact in FACTS}
    rows = []
    for change in changes(records):
        fact = by_key[change.fact]
        rows.append(
            [
                f"{fact.label} ([{fact.pages[0][0]}]({fact.pages[0][1]}))",
                changed_in(change),
                change.what,
            ]
        )
    return Table(["fact", "changed", "what changed"], rows, align=_LEFT * 3)


def distinct_listings(records: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(releases, listing)`` for each distinct dots-policy listing, oldest first."""
    return [(r.releases, "\n".join(r.value)) for r in runs(records, "dots_residuals")]
