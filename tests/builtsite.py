"""The built site that tests/test_site.py and tests/test_browser.py read.

Where it is (REMAT_GUIDE_HTML, by default _build/html), which pages the build wrote, and the path
the hosted site lives under. Plain functions, importable without JAX (the browser session's
environment has Playwright only); `pyproject.toml` puts tests/ on the path for them.
"""

from __future__ import annotations

import os
import re
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HTML = Path(os.environ.get("REMAT_GUIDE_HTML", ROOT / "_build" / "html"))


def installed_from_lock() -> bool:
    """Whether this Python environment is one that nox installed from the lock (its stamp file,
    noxfile.install), rather than one made otherwise (`nox -s tests-installed`, say)."""
    return (Path(sys.prefix) / ".remat-guide-installed").is_file()


def pages(site: Path = HTML) -> list[str]:
    """Every page the build wrote, as a path under the site root (search and index pages aside)."""
    return sorted(
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if not p.relative_to(site).as_posix().startswith(("_", "genindex", "search"))
    )


def hosted_path(site: Path = HTML) -> str:
    """The path the hosted site lives under (e.g. /jax-remat-guide/), from its canonical URL."""
    page = (site / "index.html").read_text(encoding="utf-8")
    canonical = re.search(r'<link rel="canonical" href="([^"]+)"', page)
    if canonical is None:
        return "/"
    path = urllib.parse.urlsplit(canonical.group(1)).path
    return path[: path.rfind("/") + 1]
