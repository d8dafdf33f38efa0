"""examples.reference.release_views: one view per release, reasons in one wording each, and the
committed pages equal to their generator's output."""

from __future__ import annotations

import copy
from pathlib import Path

from examples.reference import release_table, release_views, releases

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_one_reason_has_one_wording_whatever_release_it_names():
    remat3 = [
        "this JAX has no jax_remat3 flag",
        "jax 0.5.0 has no jax_remat3 flag",
        "jax 0.9.2 has no jax_remat3 flag",
        "this JAX has no jax_remat3",
        "no jax_remat3 flag",
        "jax 0.8.3 lacks the jax_remat3 flag",
    ]
    assert {release_views.wording(r) for r in remat3} == {"this JAX has no jax_remat3 flag"}
    assert (
        release_views.wording("jax 0.6.2's jax.checkpoint lacks static_argnames (from 0.10)")
        == release_views.wording("jax 0.9.2's jax.checkpoint lacks static_argnames (from 0.10)")
        == "this JAX's jax.checkpoint lacks static_argnames (from 0.10)"
    )
    compilers = {
        release_views.wording(f"the compiler for '{t}' is not installed here (see `nox -s plans`)")
        for t in ("h100-80gb", "tpu-v5e:2x2")
    }
    assert len(compilers) == 1
    # A release named inside the sentence is part of what it says, not the release's own name.
    assert release_views.wording("no committed record of jax 0.6.2 (the matrix writes one)") == (
        "no committed record of jax 0.6.2 (the matrix writes one)"
    )


def test_the_committed_records_skip_for_few_reasons():
    # The review counted 402 of 564 (test, reason) rows as one reason in 14 wordings.
    records = releases.load_all()
    pairs = {releases.shown(i) for r in records for i in r["tests"]["skipped"]}
    remat3 = {
        reason
        for _, reason in pairs
        if release_views.wording(reason) == "this JAX has no jax_remat3 flag"
    }
    assert len(remat3) >= 5
    for rec in records:
        grouped = release_views.skipped_by_reason(rec)
        assert sum(n for _, n, _ in grouped) == len(rec["tests"]["skipped"])
        reasons = [r for r, _, _ in grouped]
        assert len(reasons) == len(set(reasons))


def test_each_view_lists_exactly_the_facts_that_differ_from_the_newest(record):
    records = releases.load_all()
    newest = records[-1]
    older = copy.deepcopy(newest)
    older["runinfo"]["jax"] = "0.0.1"
    older["facts"]["remat_is_checkpoint"] = not newest["facts"]["remat_is_checkpoint"]
    series = [older, newest]
    assert [f.key for f in release_views.differing_facts(series, older)] == ["remat_is_checkpoint"]
    assert release_views.differing_facts(series, newest) == []
    (row,) = release_views.facts_table(series, older).rows
    assert row[1] != row[2]
    assert "migration notes" in release_views.summary(series, older)


def test_two_lists_of_names_of_one_length_show_which_names_differ():
    records = releases.load_all()
    for rec in records:
        for row in release_views.facts_table(records, rec).rows:
            assert row[1] != row[2], (release_table.release(rec), row[0])


def test_every_release_has_its_page_and_the_pages_are_the_generators_output():
    folder = DOCS / "reference" / release_views.FOLDER
    records = releases.load_all()
    expected = {f"{release_views.slug(r)}.md": release_views.page(r, records) for r in records}
    found = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("jax-*.md")}
    assert set(found) == set(expected), "run `python -m examples.reference.release_views`"
    for name, text in expected.items():
        assert found[name] == text, f"{name}: run `python -m examples.reference.release_views`"


def test_a_page_is_named_by_its_version_and_says_so_in_its_title():
    records = releases.load_all()
    for rec in records:
        text = release_views.page(rec, records)
        version = release_table.release(rec)
        assert f"\n# jax {version}\n" in text
        assert release_views.slug(rec) == "jax-" + version.replace(".", "-")


def test_write_pages_removes_views_of_releases_no_longer_recorded(tmp_path):
    records = releases.load_all()
    stale = tmp_path / "reference" / release_views.FOLDER / "jax-0-0-0.md"
    stale.parent.mkdir(parents=True)
    stale.write_text("old", encoding="utf-8")
    written = release_views.write_pages(tmp_path, records)
    assert not stale.exists()
    assert len(written) == len(records)


def test_the_overview_has_one_row_per_reason_and_a_column_per_release():
    records = releases.load_all()
    table = release_views.skipped_overview(records)
    assert len(table.header) == len(records) + 1
    reasons = [row[0] for row in table.rows]
    assert len(reasons) == len(set(reasons))
    assert "this JAX has no jax_remat3 flag" in reasons
    # The 564-row table of (test, reason) pairs is now this many rows.
    assert len(table.rows) < 40


def test_links_written_for_the_reference_folder_work_from_a_view():
    assert release_views.from_view("[a](policies.md#x), [b](../tutorial/t.md)") == (
        "[a](../policies.md#x), [b](../../tutorial/t.md)"
    )
    kept = "[c](https://github.com/x), [d](#here)"
    assert release_views.from_view(kept) == kept
    records = releases.load_all()
    for link in release_views.pages_changed(records, records[0]):
        assert "](../" in link, link


def test_the_releases_page_lists_every_view_newest_first():
    text = (DOCS / "reference" / "releases.md").read_text(encoding="utf-8")
    toctree = text.split("```{toctree}", 1)[1].split("```", 1)[0]
    entries = [line for line in toctree.splitlines() if line.startswith("releases/")]
    records = releases.load_all()
    assert entries == [f"releases/{release_views.slug(r)}" for r in reversed(records)]
