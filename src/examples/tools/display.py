"""How the site shows figures: tables from rows, bytes and times formatted once, long text folded.

A page cell returns a :class:`Table` (it renders as a Markdown table on the page and as aligned
text in a terminal) or a :class:`Folded` listing; no page defines a table helper of its own.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

Align = Literal["left", "right", "center"]

# --- numbers -------------------------------------------------------------------------------------


def format_bytes(n: int | float) -> str:
    """``1536`` -> ``"1.5 KiB"``; exact below a KiB."""
    n = int(n)
    if abs(n) < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


_TIME_UNITS = (("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def _time_unit(seconds: float) -> tuple[str, float]:
    return next(((u, s) for u, s in _TIME_UNITS if seconds >= s), _TIME_UNITS[-1])


def format_seconds(seconds: float) -> str:
    """``0.00042`` -> ``"420 µs"``; ``4028`` -> ``"67.1 min"``."""
    unit, scale = _time_unit(seconds)
    return f"{seconds / scale:.3g} {unit}"


def format_range(low: float, high: float) -> str:
    """``(0.00102, 0.00131)`` -> ``"1.02–1.31 ms"``, in the unit of the larger."""
    unit, scale = _time_unit(high)
    return f"{low / scale:.3g}–{high / scale:.3g} {unit}"


def format_ratio(value: float | None, base: float | None) -> str:
    """``value / base`` as ``"1.33×"``, or ``"n/a"`` where either is missing or zero."""
    if not value or not base:
        return "n/a"
    return f"{value / base:.2f}×"


# --- tables --------------------------------------------------------------------------------------


class Table:
    """Rows of cells under a header: Markdown on a page, aligned text in a terminal.

    ``rows`` are sequences of cells, or mappings keyed by the header's columns. Cells are shown
    with ``str``; a cell that should read as code is written with backticks by the caller.
    ``align`` gives each column's alignment (default: the first left, the others right).
    """

    def __init__(
        self,
        header: Sequence[str],
        rows: Iterable[Sequence[Any] | Mapping[str, Any]],
        align: Sequence[Align] | None = None,
        caption: str | None = None,
    ) -> None:
        self.header = [str(h) for h in header]
        self.rows = [self._cells(row) for row in rows]
        self.align: list[Align] = (
            ["left" if i == 0 else "right" for i in range(len(self.header))]
            if align is None
            else list(align)
        )
        if len(self.align) != len(self.header):
            raise ValueError(f"{len(self.align)} alignments for {len(self.header)} columns")
        self.caption = caption

    def _cells(self, row: Sequence[Any] | Mapping[str, Any]) -> list[str]:
        cells = [row[h] for h in self.header] if isinstance(row, Mapping) else list(row)
        if len(cells) != len(self.header):
            raise ValueError(f"a row has {len(cells)} cells, the header {len(self.header)}")
        return ["" if c is None else str(c) for c in cells]

    def column(self, name: str) -> list[str]:
        i = self.header.index(name)
        return [row[i] for row in self.rows]

    def to_markdown(self) -> str:
        rule = {"left": "---", "right": "---:", "center": ":---:"}
        lines = [
            "| " + " | ".join(_escape_pipes(h) for h in self.header) + " |",
            "| " + " | ".join(rule[a] for a in self.align) + " |",
        ]
        lines += ["| " + " | ".join(_escape_pipes(c) for c in row) + " |" for row in self.rows]
        if self.caption:
            lines = [self.caption, "", *lines]
        return "\n".join(lines)

    def to_text(self) -> str:
        widths = [max(len(c) for c in col) for col in zip(self.header, *self.rows, strict=True)]

        def line(cells: Sequence[str]) -> str:
            parts = [
                c.ljust(w) if a == "left" else c.rjust(w) if a == "right" else c.center(w)
                for c, w, a in zip(cells, widths, self.align, strict=True)
            ]
            return "  ".join(parts).rstrip()

        out = [line(self.header), "  ".join("-" * w for w in widths)]
        out += [line(row) for row in self.rows]
        if self.caption:
            out = [self.caption, *out]
        return "\n".join(out)

    def _repr_markdown_(self) -> str:
        return self.to_markdown()

    def __str__(self) -> str:
        return self.to_markdown()

    def __repr__(self) -> str:
        return self.to_text()


def _escape_pipes(cell: str) -> str:
    return cell.replace("|", "\\|")


# --- long listings -------------------------------------------------------------------------------

#: Listings longer than this many lines are folded by :func:`listing`.
FOLD_AFTER = 25


class Folded:
    """A long text (a jaxpr, a residual listing) behind a one-line summary that opens it.

    In a notebook or on the page it is an HTML ``<details>`` element; as plain text, the summary
    followed by the text.
    """

    def __init__(self, text: str, summary: str) -> None:
        self.text = text
        self.summary = summary

    def __repr__(self) -> str:
        return f"{self.summary}\n{self.text}"

    def _repr_html_(self) -> str:
        return (
            '<details class="remat-folded"><summary>'
            f"{html.escape(self.summary)}</summary>"
            f'<pre class="remat-folded-text">{html.escape(self.text)}</pre></details>'
        )


class Listing:
    """A text shown as it is (a ``<pre>`` block); used where a listing is short enough."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def listing(text: str, summary: str, fold_after: int = FOLD_AFTER) -> Folded | Listing:
    """``text`` folded behind ``summary`` if it has more than ``fold_after`` lines, else as is."""
    lines = text.count("\n") + 1
    if lines > fold_after:
        return Folded(text, f"{summary} ({lines} lines; click to open)")
    return Listing(text)
