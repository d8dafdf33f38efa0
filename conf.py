"""Sphinx configuration for the JAX Remat Guide (sources in docs/, built by `nox -s docs`)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import sys
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "docs" / "_ext"))

project = "JAX Remat Guide"
author = "The JAX Remat Guide authors"
copyright = "2026, the JAX Remat Guide authors"

extensions = [
    "myst_nb",
    "sphinx.ext.intersphinx",
    "sphinx_copybutton",
    "sphinx_design",
    "sphinx_sitemap",
    "sphinxext.opengraph",
    "notfound.extension",
    "remat_site",
    "take_home",
    # Fast on a phone (docs/_ext/performance.py): math as MathML at build time, scripts that
    # wait for the page, images sized and lazy. `nox -s lighthouse` measures the result.
    "performance",
    # Search ranks sections (docs/_ext/section_search.py): what readers paste finds its answer.
    "section_search",
]
# The search page's ranking of sections; Sphinx inlines it into language_data.js.
html_search_scorer = "docs/_ext/section_search.js"
html_math_renderer = "mathml"  # registered by performance; no MathJax on any page

root_doc = "index"
exclude_patterns = [
    "_build",
    "jupyter_execute",
    "**.ipynb_checkpoints",
    "_ext",
    "_tools",
    "_static",
    "_inventories",
]
templates_path: list[str] = []
html_static_path = ["docs/_static"]
html_css_files = ["remat.css"]

# --- MyST and notebook execution -----------------------------------------------------------------

myst_enable_extensions = ["colon_fence", "dollarmath", "deflist", "attrs_inline"]
myst_heading_anchors = 3

# Every code cell runs at build time. A cell that raises fails the build (unless it is tagged
# `raises-exception`, the way to show an error on purpose), and the warning names the page and the
# cell with its traceback; `-W` in the nox session turns every warning into an error.
nb_execution_mode = "cache"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_allow_errors = False
nb_execution_timeout = int(os.environ.get("REMAT_GUIDE_CELL_TIMEOUT", "300"))
nb_merge_streams = True
# Markdown that a cell outputs (tables, say) is rendered with MyST, so that tables work.
nb_render_markdown_format = "myst"


def _examples_fingerprint() -> str:
    """A hash of what a page's outputs depend on besides its own text.

    Pages import their code from `src/examples` and read its data files (the release records,
    the recorded runs), so a change there, or another jax / jaxlib / flax (or CUDA plugin)
    release, must re-execute every page even when no page changed. The hash names the execution
    cache's folder: a new hash is a new, empty cache, and since the folder is a configuration
    value, Sphinx re-reads every page when it changes.
    """
    digest = hashlib.sha256()
    package = ROOT / "src" / "examples"
    files = (p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in sorted(files):
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in {"jax", "jaxlib", "flax"} or name.startswith(("jax-cuda", "jax_cuda")):
            digest.update(f"{name}=={dist.version}".encode())
    return digest.hexdigest()[:16]


# REMAT_GUIDE_BUILD_DIR lets several builds run side by side without sharing a cache.
BUILD_DIR = Path(os.environ.get("REMAT_GUIDE_BUILD_DIR", ROOT / "_build"))
_CACHE_ROOT = BUILD_DIR / ".jupyter_cache"
nb_execution_cache_path = str(_CACHE_ROOT / _examples_fingerprint())
if _CACHE_ROOT.is_dir():  # caches of earlier package versions can never be hit again
    for stale in _CACHE_ROOT.iterdir():
        if stale.is_dir() and str(stale) != nb_execution_cache_path:
            shutil.rmtree(stale, ignore_errors=True)

# While writing one page: REMAT_GUIDE_EXECUTE_ONLY="tutorial/*" executes only the pages whose
# document names match (fnmatch patterns, comma-separated); the others render without outputs.
if _only := os.environ.get("REMAT_GUIDE_EXECUTE_ONLY"):
    import fnmatch

    _patterns = [p.strip() for p in _only.split(",") if p.strip()]
    # Absolute paths: myst-nb matches patterns from the right, so "index.md" would also
    # exclude "problems/index.md".
    nb_execution_excludepatterns = [
        page.as_posix()
        for page in (ROOT / "docs").rglob("*.md")
        if not any(
            fnmatch.fnmatch(page.relative_to(ROOT / "docs").with_suffix("").as_posix(), p)
            for p in _patterns
        )
    ]
    # Pages left unexecuted have no glued values: their {glue} roles would each warn (and fail a
    # -W build) although nothing is wrong with them. A full build keeps these warnings as errors.
    suppress_warnings = ["mystnb.glue", "mystnb.glue_ref"]

# --- HTML ----------------------------------------------------------------------------------------

REPOSITORY_URL = os.environ.get(
    "REMAT_GUIDE_REPOSITORY_URL", "https://github.com/jax-remat-guide/jax-remat-guide"
)

html_theme = "sphinx_book_theme"
html_title = "JAX Remat Guide"
html_theme_options = {
    "repository_url": REPOSITORY_URL,
    "repository_branch": "main",
    "path_to_docs": "docs",
    "use_repository_button": True,
    "use_download_button": True,
    "use_source_button": True,
    "use_issues_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "navigation_with_keys": False,
    # pydata-sphinx-theme 0.20 puts a search field in its own header unless this is set, and the
    # book theme shows that header above its own: two search fields on a desktop, one in the
    # header and one in the sidebar. The sidebar's (desktop) and the article header's button
    # (phone) remain.
    "navbar_persistent": [],
}
# Launch buttons (the rocket in a notebook page's header). Binder opens the page's MyST source in
# JupyterLab, in an environment built from binder/ (the package, matplotlib, myst-nb for glue and
# jupytext, which opens the .md file as a notebook); it needs the repository on GitHub. No Colab
# button: the theme's links to the .md file on GitHub, which Colab cannot open. A page's notebook
# runs in Colab when uploaded there (download menu, .ipynb): its first cell installs the package.
if urllib.parse.urlsplit(REPOSITORY_URL).netloc == "github.com":
    html_theme_options["launch_buttons"] = {
        "binderhub_url": "https://mybinder.org",
        "notebook_interface": "jupyterlab",
    }
html_last_updated_fmt = None
html_copy_source = True

copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True
copybutton_exclude = ".linenos, .gp, .go"

# The theme reads the colour mode from <html data-theme>; without a default it logs a console
# error on a reader's first visit ("Got invalid theme mode"). "auto" follows the OS setting.
html_context = {"default_mode": "auto"}

# Our own logo and favicon (a forward arrow, a backward arrow, one checkpoint kept between);
# without a favicon, browsers ask for /favicon.ico and log a 404.
html_logo = "docs/_static/logo.svg"
html_favicon = "docs/_static/logo.svg"
# Browsers that cannot show an SVG icon ask for /favicon.ico (16, 32, 48 px, drawn from logo.svg by
# docs/_tools/make_images.py), so it sits at the site's root too.
html_extra_path = ["docs/_static/favicon.ico"]
html_js_files = ["a11y.js"]

# --- Links to the JAX and Flax API docs, without the network -------------------------------------

# {py:func}`jax.checkpoint`, {py:func}`~jax.checkpoint_policies.dots_saveable` or
# {py:func}`nn.checkpoint <flax.linen.checkpoint>` on a page link to the upstream API pages. The
# inventories are small files of our own (docs/_tools/make_inventories.py writes them from a list of
# names and URLs), read from disk: a build never fetches one.
INVENTORIES = Path(os.environ.get("REMAT_GUIDE_INVENTORIES", ROOT / "docs" / "_inventories"))
_UPSTREAM = {
    "jax": "https://docs.jax.dev/en/latest/",
    "flax": "https://flax.readthedocs.io/en/latest/",
    "flax_linen": "https://flax-linen.readthedocs.io/en/latest/",
}
intersphinx_mapping = {
    name: (url, str(INVENTORIES / f"{name}.inv"))
    for name, url in _UPSTREAM.items()
    if (INVENTORIES / f"{name}.inv").is_file()
}
_MISSING_INVENTORIES = sorted(set(_UPSTREAM) - set(intersphinx_mapping))
_NAMES = {"jax": r"jax(\..*)?", "flax": r"flax\.nnx(\..*)?", "flax_linen": r"flax\.linen(\..*)?"}
# Names of a project whose inventory is missing render as plain code text, and one warning (in
# setup, below) says how to fix it, instead of one nitpicky warning per name.
nitpick_ignore_regex = [(r"py:.*", _NAMES[name]) for name in _MISSING_INVENTORIES]
# Policies are values as much as functions: show `jax.checkpoint`, not `jax.checkpoint()`.
add_function_parentheses = False

# --- Hosting: canonical URLs, sitemap, 404 page, link previews -----------------------------------

# Where the site is served from. Read the Docs sets READTHEDOCS_CANONICAL_URL; GitHub Pages builds
# set REMAT_GUIDE_BASE_URL in the workflow. It must end with a slash.
BASE_URL = (
    os.environ.get("REMAT_GUIDE_BASE_URL")
    or os.environ.get("READTHEDOCS_CANONICAL_URL")
    or "https://jax-remat-guide.github.io/jax-remat-guide/"
)
BASE_URL = BASE_URL.rstrip("/") + "/"
html_baseurl = BASE_URL

sitemap_url_scheme = "{link}"
sitemap_excludes = ["search.html", "genindex.html", "404.html"]
sitemap_show_lastmod = False  # a date would make two builds of one commit differ

# The 404 page is served for any missing path, at any depth: its links and assets are absolute,
# under the path the site is served from (e.g. /jax-remat-guide/ on GitHub Pages).
notfound_urls_prefix = urllib.parse.urlsplit(BASE_URL).path
notfound_pagename = "404"

# Link previews (Open Graph): our own card image, no generated social cards (those need
# matplotlib fonts at build time and differ between machines).
ogp_site_url = BASE_URL
ogp_site_name = project
ogp_image = "_static/social-card.png"
ogp_image_alt = "JAX Remat Guide: a forward arrow, a backward arrow and a checkpoint between"
ogp_social_cards = {"enable": False}
ogp_type = "website"
ogp_enable_meta_description = True


def setup(app):
    if _MISSING_INVENTORIES:
        from sphinx.util import logging

        logging.getLogger("remat_guide").warning(
            "no inventory for %s in %s: API names of those projects render as plain text. "
            "Write the inventories with `python docs/_tools/make_inventories.py`",
            ", ".join(_MISSING_INVENTORIES),
            INVENTORIES,
        )
