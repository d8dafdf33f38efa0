"""Serve MathJax from the site itself, so that no page asks a CDN for it.

The MathJax files come from the PyPI package ``sphinx-mathjax-offline``; only what a page loads is
copied (the TeX-to-CHTML bundle, its fonts and the TeX extensions it may autoload), about 3 MB
instead of the package's 24 MB.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.fileutil import copy_asset, copy_asset_file

_NEEDED = ["tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions"]


def _mathjax_dir() -> Path:
    spec = importlib.util.find_spec("sphinx-mathjax-offline")
    if spec is None or spec.origin is None:
        raise ExtensionError(
            "MathJax for offline pages comes from the package sphinx-mathjax-offline, which is "
            "not installed: install the `docs` dependency group (nox -s docs does)"
        )
    return Path(spec.origin).parent / "static" / "mathjax"


def _copy(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    source = _mathjax_dir()
    target = Path(app.outdir) / "_static" / "mathjax"
    for part in _NEEDED:
        if (source / part).is_dir():
            copy_asset(source / part, target / part)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            copy_asset_file(source / part, target / part)


def setup(app: Sphinx) -> dict[str, object]:
    _mathjax_dir()  # fail early, with the fix, when the package is missing
    app.config.mathjax_path = "mathjax/tex-chtml.js"
    app.connect("build-finished", _copy)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
