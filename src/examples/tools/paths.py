"""Keep the build machine's file paths off the hosted pages.

Tracebacks and some JAX messages name files by absolute path: a notebook cell is
``/tmp/ipykernel_1130/1801108376.py``, a library file sits under ``.../site-packages/``, and the
repository under wherever it was cloned. A page that printed them would show the build machine's
layout to every reader. :func:`scrub_paths` rewrites them into names that mean the same to a reader:
``<cell>``, ``jax/_src/api.py``, ``src/examples/tutorial/traced.py``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

#: The folder that holds this package (``src/`` in a checkout): its files are shown as
#: ``examples/...`` wherever they appear.
_PACKAGE_PARENT = Path(__file__).resolve().parents[2]

_CELL = re.compile(r"(?:[A-Za-z]:)?[/\\][^\s\"'<>]*?ipykernel_\d+[/\\]\d+\.py")
_SITE_PACKAGES = re.compile(r"(?:[A-Za-z]:)?[/\\][^\s\"'<>]*?[/\\](?:site|dist)-packages[/\\]")


def _prefixes(roots: Iterable[str | Path]) -> list[str]:
    found = {str(Path(r)) for r in roots if r}
    found |= {sys.prefix, sys.base_prefix, sys.exec_prefix, str(_PACKAGE_PARENT)}
    # Longest first, so that a venv inside the repository is matched before the repository.
    return sorted((p.rstrip("/\\") for p in found if len(p) > 1), key=len, reverse=True)


def scrub_paths(text: str, roots: Iterable[str | Path] = ()) -> str:
    """Replace machine-specific absolute paths in ``text``.

    ``roots`` are folders whose paths become relative (the repository root, say); the folder
    holding the ``examples`` package is always among them, and so are the interpreter's prefixes
    (shown as ``<python>``).
    """
    text = _CELL.sub("<cell>", text)
    text = _SITE_PACKAGES.sub("", text)
    interpreter = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for prefix in _prefixes(roots):
        replacement = "<python>" if prefix in interpreter else ""
        pattern = re.escape(prefix) + r"(?P<sep>[/\\])"
        text = re.sub(pattern, (replacement + "/") if replacement else "", text)
    return text
