"""examples.tools.display: tables, formatting and folding."""

from __future__ import annotations

import pytest

from examples.tools.display import (
    Folded,
    Listing,
    Table,
    format_bytes,
    format_range,
    format_ratio,
    format_seconds,
    listing,
)


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * 2**20, "3.0 MiB")]
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


@pytest.mark.parametrize(
    ("s", "text"),
    [
        (2.5, "2.5 s"),
        (0.00042, "420 µs"),
        (0.0123, "12.3 ms"),
        (5e-8, "50 ns"),
        (59.0, "59 s"),
        (4028.0, "67.1 min"),
    ],
)
def test_format_seconds(s, text):
    assert format_seconds(s) == text


def test_format_range_and_ratio():
    assert format_range(0.00102, 0.00131) == "1.02–1.31 ms"
    assert format_ratio(4.0, 3.0) == "1.33×"
    assert format_ratio(None, 3.0) == "n/a"
    assert format_ratio(1.0, 0.0) == "n/a"


def test_table_from_sequences_and_mappings():
    t = Table(["policy", "bytes"], [["a|b", 1], {"policy": "`c`", "bytes": None}])
    assert t.to_markdown().splitlines() == [
        "| policy | bytes |",
        "| --- | ---: |",
        "| a\\|b | 1 |",
        "| `c` |  |",
    ]
    assert t._repr_markdown_() == t.to_markdown()
    assert t.column("bytes") == ["1", ""]
    assert repr(t).splitlines()[0] == "policy  bytes"


def test_table_rejects_ragged_rows():
    with pytest.raises(ValueError, match="3 cells, the header 2"):
        Table(["a", "b"], [[1, 2, 3]])
    with pytest.raises(ValueError, match="1 alignments for 2 columns"):
        Table(["a", "b"], [], align=["left"])


def test_listing_folds_only_long_text():
    short = listing("\n".join(["x"] * 25), "25 lines")
    assert isinstance(short, Listing)
    long = listing("\n".join(["<x>"] * 26), "the jaxpr")
    assert isinstance(long, Folded)
    assert long.summary == "the jaxpr (26 lines; click to open)"
    assert "&lt;x&gt;" in long._repr_html_()
    assert long._repr_html_().startswith('<details class="remat-folded"><summary>')
