"""Every page's prose reads in short sentences, and the tutorial's path stays short (issue 45).

Counted as ``docs/_tools/prose_stats.py`` counts (``examples.tools.prose``): paragraphs, list
items and admonition text; code, tables, headings and directive options left out.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.tools.prose import LIMIT, prose_stats

DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if not p.name.startswith("_"))
#: The most words of prose the tutorial's core path may hold; its mechanisms live on
#: docs/tutorial/how-remat-works.md.
TUTORIAL_WORDS = 3000


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_sentences_average_at_most_the_limit(page: Path) -> None:
    stats = prose_stats(page.read_text(encoding="utf-8"))
    assert stats.words_per_sentence <= LIMIT, (
        f"{page.relative_to(DOCS)} averages {stats.words_per_sentence:.1f} words a sentence "
        f"({stats.words} words, {stats.sentences} sentences); the limit is {LIMIT:g}: split the "
        "long sentences (python3 docs/_tools/prose_stats.py lists every page)"
    )


def test_the_tutorial_path_is_at_most_3000_words() -> None:
    stats = prose_stats((DOCS / "tutorial" / "gradient-checkpointing.md").read_text("utf-8"))
    assert stats.words <= TUTORIAL_WORDS, (
        f"the tutorial holds {stats.words} words of prose; move mechanisms to How remat works"
    )
