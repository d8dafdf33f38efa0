"""Count a MyST page's prose as a reader meets it: words, sentences, words per sentence.

Code cells, listings, tables, headings, labels, math blocks and directive options are not prose;
the text of admonitions, dropdowns and list items is. A roles' target (``{py:func}`jax.grad` ``)
and inline code count as one word, a link as its text. A sentence ends at ``.``, ``!`` or ``?``
before a space or the end of its paragraph, and every paragraph or list item ends one, so a list
of short items is not read as one long sentence. Abbreviations such as "e.g." do not end one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LIMIT = 25.0
"""The most words a sentence that a page's prose may average (issue 45)."""

# Fenced blocks whose body is prose: their text counts, their option lines do not.
PROSE_DIRECTIVES = frozenset(
    [
        "admonition",
        "note",
        "tip",
        "hint",
        "important",
        "warning",
        "caution",
        "attention",
        "danger",
        "error",
        "seealso",
        "dropdown",
        "margin",
        "sidebar",
        "topic",
    ]
)
ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "no.", "Fig.", "Eq.")

_FENCE = re.compile(r"^(\s*)(`{3,}|:{3,})\s*(\{([\w:-]+)\})?(.*)$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_ROLE = re.compile(r"\{[\w:+-]+\}`([^`]*)`")
_CODE = re.compile(r"``?([^`]+)``?")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"<[^>]+>")
_SENTENCE_END = re.compile(r"[.!?][\"')\]*_]*(?=\s|$)")


@dataclass(frozen=True)
class ProseStats:
    words: int
    sentences: int

    @property
    def words_per_sentence(self) -> float:
        return self.words / self.sentences if self.sentences else 0.0


def _strip_front_matter(text: str) -> str:
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            return text[end + 4 :]
    return text


def prose_units(text: str) -> list[str]:
    """The page's paragraphs and list items, as plain text, in page order."""
    units: list[str] = []
    current: list[str] = []
    stack: list[tuple[str, bool]] = []  # (fence marker, body is prose)
    in_math = in_comment = False

    def flush() -> None:
        if current:
            units.append(" ".join(current))
            current.clear()

    for raw in _strip_front_matter(text).splitlines():
        line = raw.strip()
        if in_comment:
            if "-->" in line:
                in_comment = False
            continue
        if line.startswith("<!--"):
            flush()
            in_comment = "-->" not in line
            continue
        if in_math:
            if line.endswith("$$"):
                in_math = False
            continue
        fence = _FENCE.match(raw)
        if fence:
            marker = fence.group(2)
            top = stack[-1][0] if stack else ""
            closes = bool(top) and marker.startswith(top[0]) and len(marker) >= len(top)
            if closes and not fence.group(3) and not fence.group(5).strip():
                flush()
                stack.pop()
                continue
            if not stack or stack[-1][1]:
                flush()
                name = (fence.group(4) or "").split(":")[0]
                stack.append((marker, name in PROSE_DIRECTIVES))
                continue
        if stack and not stack[-1][1]:
            continue
        if stack and re.match(r"^:[\w-]+:", line):
            continue  # a directive's option line
        if not line:
            flush()
            continue
        if line.startswith("$$"):
            flush()
            in_math = not (len(line) > 2 and line.endswith("$$"))
            continue
        if line.startswith(("#", "|", "(")) and (
            line.startswith(("#", "|")) or re.match(r"^\([\w:-]+\)=$", line)
        ):
            flush()
            continue
        markup = line.startswith(("+++", "```", ":::", "{", "<")) and not line.startswith("{py:")
        if markup and not _ROLE.match(line):
            flush()
            continue
        if _LIST_ITEM.match(line):
            flush()
            line = _LIST_ITEM.sub("", line, count=1)
        current.append(line)
    flush()
    return [u for u in (_plain(u) for u in units) if u]


def _plain(unit: str) -> str:
    unit = _ROLE.sub(lambda m: _one_word(m.group(1)), unit)
    unit = _LINK.sub(lambda m: m.group(1), unit)
    unit = _CODE.sub(lambda m: _one_word(m.group(1)), unit)
    unit = _TAG.sub(" ", unit)
    unit = re.sub(r"\$[^$]+\$", "x", unit)  # inline math: one word
    return " ".join(unit.split())


def _one_word(s: str) -> str:
    s = re.sub(r"<[^>]*>$", "", s).strip()  # a role's explicit target: "text <target>"
    return re.sub(r"\s+", "_", s) or "x"


def count_sentences(unit: str) -> int:
    masked = unit
    for abbr in ABBREVIATIONS:
        masked = masked.replace(abbr, abbr.replace(".", "_"))
    ends = len(_SENTENCE_END.findall(masked))
    if not _SENTENCE_END.search(masked.rstrip()[-3:] if masked else ""):
        ends += 1  # a paragraph or list item that ends without a full stop still ends
    return max(ends, 1)


def count_words(unit: str) -> int:
    return sum(1 for w in unit.split() if re.search(r"\w", w))


def prose_stats(text: str) -> ProseStats:
    units = prose_units(text)
    return ProseStats(
        words=sum(count_words(u) for u in units),
        sentences=sum(count_sentences(u) for u in units),
    )
