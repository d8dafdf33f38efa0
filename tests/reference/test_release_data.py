"""The records behind the page "Across JAX releases" (src/examples/data/releases/), as a
whole: enough releases, the package's lower bound among them, and what the page says of them.

The release matrix (nox -s tests-jax) leaves this file out: it is rewriting these records while
it runs. `nox -s tests` runs it.
"""

from __future__ import annotations

import pytest

from examples.reference import release_facts, release_table, releases
from examples.tools import jaxprs

DATA = releases.DATA


@pytest.fixture(scope="module")
def committed():
    return releases.load_all(DATA)


def test_the_page_covers_at_least_six_releases(committed):
    assert len(committed) >= 6
    versions = [releases.release_key(release_table.release(r)) for r in committed]
    assert versions == sorted(set(versions))


def test_the_oldest_record_is_the_package_lower_bound(committed):
    assert release_facts.package_bound("jax") == f"jax>={release_table.release(committed[0])}"
    assert release_facts.package_bound("flax") == f"flax>={committed[0]['runinfo']['flax']}"


def test_every_release_keeps_the_same_three_products(committed):
    """What the page says of the listing: the same values, only the words differ."""
    for rec in committed:
        computed = [
            line for line in rec["facts"]["dots_residuals"] if " from the argument " not in line
        ]
        assert [line.split()[0] for line in computed] == ["f32[5]", "f32[6]", "f32[7]"]
        words = {line.split(" ", 1)[1] for line in computed}
        assert words in ({"output of dot_general"}, {"output of reduce_precision"})


def test_the_data_folder_holds_only_records():
    """A stray file there would be neither loaded nor noticed."""
    assert sorted(p.name for p in DATA.iterdir()) == sorted(
        releases.file_name(release_table.release(r)) for r in releases.load_all(DATA)
    )


# --- what the page says of the data (docs/reference/releases.md, "The other facts") -------------


def _values(committed, key):
    return [rec["facts"][key] for rec in committed]


def test_the_listing_words_change_once_from_reduce_precision_to_dot_general(committed):
    words = [
        {line.split(" ", 1)[1] for line in listing if " from the argument " not in line}
        for listing in _values(committed, "dots_residuals")
    ]
    runs = [w for i, w in enumerate(words) if i == 0 or w != words[i - 1]]
    assert runs in (
        [{"output of dot_general"}],
        [{"output of reduce_precision"}],
        [{"output of reduce_precision"}, {"output of dot_general"}],
    )


def test_remat_never_takes_static_argnames_and_concrete_true_always_raises(committed):
    assert {v["error"] for v in _values(committed, "remat_static_argnames")} == {"TypeError"}
    assert {v["outcome"] for v in _values(committed, "concrete_true")} == {"raises"}


def test_static_argnames_is_a_type_error_until_declared_then_traced(committed):
    for rec in committed:
        outcome = rec["facts"]["checkpoint_static_argnames"]
        if "static_argnames" in rec["facts"]["checkpoint_keywords"]:
            assert outcome["error"] == "TracerBoolConversionError", release_table.release(rec)
        else:
            assert outcome["error"] == "TypeError", release_table.release(rec)


def test_except_names_refused_then_ignored_and_never_saved_bytes(committed):
    refuses = _values(committed, "except_names_refuses")
    assert refuses == sorted(refuses, reverse=True)  # True on a prefix, then False
    assert all(v["except_a"] == v["everything"] for v in _values(committed, "except_names_bytes"))


def test_remat3_is_another_primitive_and_off_by_default(committed):
    assert set(_values(committed, "remat_primitive")) == {"remat2"}
    assert "remat2" not in _values(committed, "remat3")
    if jaxprs.remat3_available():
        assert jaxprs.remat3_enabled() is False
