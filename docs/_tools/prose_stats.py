"""Words of prose and words per sentence of the site's pages, as a reader meets them.

Usage: ``python docs/_tools/prose_stats.py [PAGE.md ...]`` (default: every page under docs/).
Prints one line a page: prose words, sentences, words per sentence; and marks a page whose
average is over ``LIMIT`` (exit status 1 then). The counting is in ``examples.tools.prose``,
which ``tests/tools/test_prose.py`` tests and ``tests/test_prose_limits.py`` applies to the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from examples.tools.prose import LIMIT, prose_stats


def main(argv: list[str]) -> int:
    pages = [Path(a) for a in argv] or sorted((ROOT / "docs").rglob("*.md"))
    over = 0
    for page in pages:
        stats = prose_stats(page.read_text(encoding="utf-8"))
        flag = "  OVER" if stats.words_per_sentence > LIMIT else ""
        over += bool(flag)
        name = page.resolve().relative_to(ROOT) if page.resolve().is_relative_to(ROOT) else page
        print(
            f"{stats.words:6d} words {stats.sentences:5d} sentences "
            f"{stats.words_per_sentence:5.1f} w/s  {name}{flag}"
        )
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
