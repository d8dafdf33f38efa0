"""examples.reference.release_table: runs and changes across releases, the page's tables, and the
facts table's links to headings that exist."""

from __future__ import annotations

import copy
import re

import pytest
from builtsite import ROOT
from reference._helpers import series as release_series

from examples.reference import release_table, releases

# --- rendering ------------------------------------------------------------------------------------


def test_runs_and_changes_name_the_releases_around_a_change(record):
    series = release_series(
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
    series = release_series(
        record, [("0.6.2", ("policy_names", ["a", "b"])), ("0.7.2", ("policy_names", ["b", "c"]))]
    )
    (change,) = [c for c in release_table.changes(series) if c.fact == "policy_names"]
    assert change.what == "added `c`; removed `a`"


def test_a_difference_row_never_shows_two_equal_cells(record):
    # Two lists of names of one length print alike as counts; the row says which names differ.
    here = copy.deepcopy(record["facts"])
    here["policy_names"] = ["a", "b"]
    series = release_series(record, [("0.6.2", ("policy_names", ["a", "c"]))])
    table = release_table.differences(series, here)
    (row,) = [r for r in table.rows if r[0].startswith("names in `jax.checkpoint_policies`")]
    assert row[2] == "2 names: also `c`; not `b`"
    assert row[3] == "2 names"
    for row in release_table.differences(releases.load_all(), here).rows:
        assert row[2] != row[3], row


def test_tables_cover_every_fact_and_release(record):
    series = release_series(record, [("0.6.2", ("remat3", None)), ("0.7.2", ("remat3", "hi"))])
    table = release_table.facts_table(series)
    assert len(table.rows) == len(release_table.FACTS) == len(releases.FACT_KEYS)
    assert {f.key for f in release_table.FACTS} == set(releases.FACT_KEYS)
    row = table.rows[[f.key for f in release_table.FACTS].index("remat3")]
    assert "no such flag (0.6.2)" in row[1]
    assert "after 0.6.2, by 0.7.2" in row[2]
    assert release_table.releases_with(series, "remat3", "hi") == "0.7.2"
    assert release_table.releases_with(series, "remat3", "lo") == "no release of the matrix"


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


def test_each_remat3_answer_is_shown_beside_its_point():
    """The record holds seven answers in the guide's order; the cell pairs each with its point."""
    from examples.notes.remat3 import POINTS

    answers = [no for _, no, _ in POINTS]
    cell = release_table.show("remat3_points", answers)
    assert cell.split("; ") == [f"{point}: {no}" for point, no, _ in POINTS]
    assert release_table.show("remat3_points", None) == "no such flag"
    with pytest.raises(ValueError, match="zip"):
        release_table.show("remat3_points", answers[:-1])


def test_a_remat3_change_names_only_the_points_that_changed():
    # Review B: the "changed" cell printed all seven points before and after, about 1,000
    # characters, where one answer had changed.
    from examples.notes.remat3 import POINTS

    before = [no for _, no, _ in POINTS]
    after = [*before[:-1], "something else"]
    what = release_table._difference("remat3_points", before, after)
    assert what == f"{POINTS[-1][0]}: {before[-1]} → something else"
    assert release_table._difference("remat3_points", before, before) == "the same answers"
    assert release_table._difference("remat3_points", None, after).startswith("no such flag → ")
