"""Site-specific Sphinx glue for the JAX Remat Guide.

- Every page built from a notebook offers its executed notebook (``.ipynb``) in the download menu
  beside the ``.md`` source, opened by the setup cell that installs the guide's package
  (:mod:`take_home`); sphinx-book-theme offers a notebook only when launch buttons are on, and
  then without outputs.
- Cell outputs, the downloadable notebooks and the execution reports never show a path of the
  build machine (see :func:`examples.tools.paths.scrub_paths`).
- The 404 page's links work from any depth (absolute, under the path the site is served from).
- Pages do not download Font Awesome's 1.5 MB script, which only adds custom icons.
- ``sitemap.xml`` lists every page after an incremental build too, in one order.
"""

from __future__ import annotations

import json
from pathlib import Path

import take_home
from docutils import nodes
from sphinx.application import Sphinx

from examples.tools.paths import scrub_paths


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


def _with_cached_outputs(app: Sphinx, notebook: dict) -> dict:
    """The notebook with its outputs from the execution cache, where it has them.

    myst-nb 1.4 writes jupyter_execute/PAGE.ipynb with outputs only when it executed the page in
    this build; on a cache hit it writes the notebook as read, without outputs. The cache holds
    them, keyed by the notebook's code, so they are merged back here.
    """
    if app.config.nb_execution_mode != "cache" or not app.config.nb_execution_cache_path:
        return notebook
    import nbformat
    from jupyter_cache import get_cache

    try:
        cache = get_cache(app.config.nb_execution_cache_path)
        _, merged = cache.merge_match_into_notebook(nbformat.from_dict(notebook))
    except KeyError:  # not executed (REMAT_GUIDE_EXECUTE_ONLY left it out): no outputs to add
        return notebook
    return json.loads(nbformat.writes(merged))


def _executed_notebook(app: Sphinx, pagename: str) -> Path:
    return Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"


def offer_notebook(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    """Add the page's notebook to the download menu (before the theme builds the menu)."""
    if doctree is not None and _executed_notebook(app, pagename).is_file():
        context["ipynb_source"] = f"{pagename}.ipynb"


def write_notebook(app: Sphinx, pagename: str, templatename, context, doctree) -> None:
    """Write the notebook the download menu offers: ``_sources/PAGE.ipynb``.

    The executed notebook with its cached outputs, stable cell ids and no machine paths, opened by
    the setup cell of :mod:`take_home` that installs the guide's package. This runs after the
    theme, whose launch buttons copy the bare notebook to the same place.
    """
    executed = _executed_notebook(app, pagename)
    if doctree is None or not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    notebook = _with_cached_outputs(app, json.loads(executed.read_text(encoding="utf-8")))
    # Cells read from a text notebook get random ids; number them so that two builds of one
    # commit offer the same file.
    for number, cell in enumerate(notebook.get("cells", [])):
        if "id" in cell:
            cell["id"] = f"cell-{number}"
    notebook = take_home.with_setup_cell(app, notebook)
    target.write_text(
        scrub_paths(json.dumps(notebook, indent=1, ensure_ascii=False), _roots(app)) + "\n",
        encoding="utf-8",
    )


def absolute_links_on_404(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Make the 404 page's own links absolute, like sphinx-notfound-page does for its chrome.

    The page is served for a missing path at any depth, so a relative ``index.html`` would point
    below the missing path; notfound rewrites the navigation and assets, not links in the text.
    """
    prefix = getattr(app.config, "notfound_urls_prefix", None)
    if docname != getattr(app.config, "notfound_pagename", "404") or not prefix:
        return
    for ref in doctree.findall(nodes.reference):
        uri = ref.get("refuri", "")
        if uri and not uri.startswith(("#", "/")) and "://" not in uri and ":" not in uri:
            ref["refuri"] = prefix.rstrip("/") + "/" + uri


FONTAWESOME_JS = "_static/scripts/fontawesome.js"


def drop_fontawesome_js(app: Sphinx, exception: Exception | None) -> None:
    """Replace pydata-sphinx-theme's Font Awesome script (1.5 MB, 0.5 MB gzipped) by a stub.

    The theme's stylesheet already draws every Font Awesome icon from its web fonts; the script
    exists only so that sites can add icons of their own (the theme says so), which this site
    does not. Without it a page transfers about half as much. The tag stays in the pages (it is
    in the theme's template), so the stub keeps it from failing.
    """
    if exception is not None or app.builder.format != "html":
        return
    script = Path(app.outdir) / FONTAWESOME_JS
    if script.is_file() and script.stat().st_size > 1000:
        script.write_text(
            "/* Font Awesome's script is not needed here: the theme's CSS draws the icons "
            "(docs/_ext/remat_site.py). */\n",
            encoding="utf-8",
        )


def complete_sitemap(app: Sphinx, exception: Exception | None) -> None:
    """Give sphinx-sitemap every page, not only those this run wrote, sorted.

    sphinx-sitemap collects a link as each page is written, so after an incremental build (the
    author's loop) its ``sitemap.xml`` listed only the re-written pages. This runs just before it
    (priority 499): it adds every document of the project the way sphinx-sitemap names it, takes
    all the links back without repeats, and hands them back in sorted order, so two builds of one
    commit write the same file.
    """
    if exception is not None or app.builder.format != "html":
        return
    links = getattr(app.env.app, "sitemap_links", None)  # sphinx-sitemap's queue
    if links is None:
        return
    import queue

    import sphinx_sitemap

    for docname in sorted(app.env.found_docs):
        sphinx_sitemap.add_html_link(app, docname, None, {}, None)  # skips sitemap_excludes
    collected = []
    while True:
        try:
            collected.append(links.get_nowait())
        except queue.Empty:
            break
    for link in sorted(set(collected), key=lambda item: item[0]):
        links.put(link)


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("build-finished", complete_sitemap, priority=499)
    app.connect("doctree-read", scrub_outputs)
    app.connect("doctree-resolved", absolute_links_on_404)
    app.connect("build-finished", drop_fontawesome_js)
    # The menu entry before sphinx-book-theme builds its header buttons (priority 501); the file
    # after them, since its launch buttons copy the bare notebook to the same place.
    app.connect("html-page-context", offer_notebook, priority=500)
    app.connect("html-page-context", write_notebook, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
