"""Site-specific Sphinx glue for the JAX Remat Guide.

- Every page built from a notebook offers its executed notebook (``.ipynb``) in the download menu
  beside the ``.md`` source; sphinx-book-theme does that only when launch buttons are on.
- Cell outputs, the downloadable notebooks and the execution reports never show a path of the
  build machine (see :func:`examples.paths.scrub_paths`).
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx

from examples.paths import scrub_paths


def _roots(app: Sphinx) -> list[str]:
    return [app.confdir, app.srcdir, app.outdir, Path(app.outdir).parent]


def scrub_outputs(app: Sphinx, doctree: nodes.document) -> None:
    """Rewrite machine paths in every text node of every cell output."""
    roots = _roots(app)
    for container in doctree.findall(nodes.container):
        if "cell_output" not in container.get("classes", []):
            continue
        for text in list(container.findall(nodes.Text)):
            clean = scrub_paths(str(text), roots)
            if clean != str(text):
                text.parent.replace(text, nodes.Text(clean))
        for raw in container.findall(nodes.raw):
            for text in list(raw.findall(nodes.Text)):
                clean = scrub_paths(str(text), roots)
                if clean != str(text):
                    raw.replace(text, nodes.Text(clean))


def offer_notebook(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    """Copy the executed notebook next to the page's sources and add it to the download menu."""
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if doctree is None or not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    notebook = json.loads(executed.read_text(encoding="utf-8"))
    target.write_text(
        scrub_paths(json.dumps(notebook, indent=1, ensure_ascii=False), _roots(app)) + "\n",
        encoding="utf-8",
    )
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("doctree-read", scrub_outputs)
    # Before sphinx-book-theme builds its header buttons (priority 501).
    app.connect("html-page-context", offer_notebook, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
