"""The package travels with the site: every page can be run outside the repository.

- Each build makes the project's wheel (hatchling, the build backend of ``pyproject.toml``) and
  serves it at ``_static/wheels/NAME-VERSION-py3-none-any.whl``: one file, one URL per build
  (:func:`wheel_url`). Hatchling builds are reproducible, so two builds of one commit serve the
  same bytes.
- Each downloadable notebook starts with a setup cell (:func:`setup_cell`) that installs that
  wheel, with matplotlib, unless the package is importable already (a clone of the repository,
  or an earlier install of the same release); it also stands in for ``myst_nb.glue`` where
  myst-nb is not installed. ``REMAT_GUIDE_WHEEL`` overrides the URL (``nox -s notebooks`` points
  it at the site's wheel file).
- Each page that runs code shows the same install command under its banner, in a "Run this page
  yourself" note folded to one line (:func:`add_note`), so that the page's first screen belongs
  to its own text.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

#: Where the wheel sits in the built site.
WHEEL_DIR = "_static/wheels"
#: The cell id and tag that mark the setup cell in a downloaded notebook.
SETUP_ID = "remat-guide-setup"
SETUP_TAG = "remat-guide-setup"
#: Points the setup cell at another wheel (a file path or a URL) than the site's.
WHEEL_VARIABLE = "REMAT_GUIDE_WHEEL"
#: Written in a page's inline code or code block, it becomes this build's wheel address (and so it
#: does in the page's downloaded notebook).
WHEEL_PLACEHOLDER = "{wheel-url}"


def project(root: str | Path) -> tuple[str, str]:
    """(distribution name, version) from ``pyproject.toml``."""
    data = tomllib.loads((Path(root) / "pyproject.toml").read_text(encoding="utf-8"))
    return data["project"]["name"], data["project"]["version"]


def wheel_name(root: str | Path) -> str:
    """The file name of the project's (pure-Python) wheel, as the packaging specs spell it."""
    name, version = project(root)
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-py3-none-any.whl"


def wheel_url(base_url: str, root: str | Path) -> str:
    """The hosted address of the wheel: the site's address, then :data:`WHEEL_DIR`."""
    return f"{base_url.rstrip('/')}/{WHEEL_DIR}/{wheel_name(root)}"


def build_wheel(root: str | Path, out: Path) -> Path:
    """Build the project's wheel into ``out`` with hatchling and return its path.

    The PEP 517 hook runs in a subprocess whose working folder is the project (hatchling reads
    the project from there). Hatchling's wheels are reproducible by default: file times come from
    ``SOURCE_DATE_EPOCH`` (a fixed date where it is unset) and the files are in a fixed order.
    """
    out.mkdir(parents=True, exist_ok=True)
    hook = "import sys; from hatchling.build import build_wheel; print(build_wheel(sys.argv[1]))"
    try:
        result = subprocess.run(
            [sys.executable, "-c", hook, str(out)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ExtensionError(f"could not build the project's wheel: {error}") from error
    if result.returncode != 0:
        if "No module named 'hatchling'" in result.stderr:
            raise ExtensionError(
                "the site serves the project's wheel, and building it needs hatchling, the build "
                "backend named in pyproject.toml, which this environment lacks: "
                "`pip install hatchling` (`nox -s docs` installs it)"
            )
        raise ExtensionError(f"building the project's wheel failed:\n{result.stderr[-3000:]}")
    built = out / result.stdout.strip().splitlines()[-1]
    expected = wheel_name(root)
    if built.name != expected:
        raise ExtensionError(f"the wheel is named {built.name}, not {expected} as expected")
    return built


def serve_wheel(app: Sphinx) -> None:
    """Build the wheel and put it in the site, the only wheel there (``builder-inited``)."""
    if app.builder.format != "html":
        return
    target = Path(app.outdir) / WHEEL_DIR
    with tempfile.TemporaryDirectory(prefix="remat-wheel-") as tmp:
        built = build_wheel(app.confdir, Path(tmp))
        target.mkdir(parents=True, exist_ok=True)
        for old in target.glob("*.whl"):
            if old.name != built.name:
                old.unlink()
        shutil.copyfile(built, target / built.name)


def _base_url(app: Sphinx) -> str:
    base: str = app.config.html_baseurl
    if not base:
        raise ExtensionError("html_baseurl is empty: the notebooks need the site's address")
    return base


def install_command(app: Sphinx) -> str:
    """The one-line command that installs what the pages need into a reader's environment."""
    return f'pip install "{wheel_url(_base_url(app), app.confdir)}" matplotlib'


SETUP_SOURCE = """\
# Setup: this page runs code from the JAX Remat Guide's package, `examples`. Where that package
# (this release) and matplotlib are missing, this cell installs them from the guide's site, with
# JAX and Flax; where they are importable already (in a clone of the guide's repository, say), it
# does nothing. {variable} names another wheel to install (a file or a URL).
import importlib.metadata
import importlib.util
import os
import sys
import types

RELEASE = "{version}"
WHEEL = os.environ.get("{variable}") or "{url}"


def guide_package_ready():
    try:
        return importlib.metadata.version("{name}") == RELEASE
    except importlib.metadata.PackageNotFoundError:  # not installed; on the path of a clone?
        try:
            return importlib.util.find_spec("examples.tools.runinfo") is not None
        except ImportError:
            return False


if not guide_package_ready() or importlib.util.find_spec("matplotlib") is None:
    # pip's note about restarting the kernel does not apply here: nothing has imported them yet.
    %pip install --quiet "{{WHEEL}}" matplotlib
    importlib.invalidate_caches()

if importlib.util.find_spec("myst_nb") is None:
    # On the site, cells hand values to the prose with myst_nb.glue; without myst-nb, glue
    # shows a value where it is asked to (display=True) and otherwise does nothing.
    from IPython.display import display as _show

    _myst_nb = types.ModuleType("myst_nb")
    _myst_nb.glue = lambda name, value, display=True: _show(value) if display else None
    sys.modules["myst_nb"] = _myst_nb
"""


def setup_cell(app: Sphinx) -> dict[str, Any]:
    """The first cell of every downloadable notebook (an nbformat 4 code cell)."""
    name, version = project(app.confdir)
    source = SETUP_SOURCE.format(
        name=name,
        version=version,
        url=wheel_url(_base_url(app), app.confdir),
        variable=WHEEL_VARIABLE,
    )
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": SETUP_ID,
        "metadata": {"tags": [SETUP_TAG]},
        "outputs": [],
        "source": source.splitlines(keepends=True),
    }


def with_setup_cell(app: Sphinx, notebook: dict[str, Any]) -> dict[str, Any]:
    """The notebook with the setup cell first (once, however often it is called), and the wheel's
    address in place of :data:`WHEEL_PLACEHOLDER` in its Markdown cells."""
    url = wheel_url(_base_url(app), app.confdir)
    cells = []
    for cell in notebook.get("cells", []):
        if cell.get("id") == SETUP_ID:
            continue
        if cell.get("cell_type") == "markdown":
            source = "".join(cell.get("source", []))
            if WHEEL_PLACEHOLDER in source:
                cell = {**cell, "source": source.replace(WHEEL_PLACEHOLDER, url)}
        cells.append(cell)
    return {**notebook, "cells": [setup_cell(app), *cells]}


NOTE_TITLE = "Run this page yourself"
#: The note's text; `backticks` mark code.
NOTE_TEXT = (
    "The notebook in the download menu (`.ipynb`) runs anywhere with Python 3.11 or newer: its "
    "first cell installs the guide's code, the package `examples` with JAX and Flax, from this "
    "site. To install the same into an environment of your own:"
)


def _paragraph(text: str) -> nodes.paragraph:
    """A paragraph of ``text``, its `backticked` parts as inline code."""
    paragraph = nodes.paragraph()
    for number, part in enumerate(text.split("`")):
        if part:
            paragraph += nodes.literal(part, part) if number % 2 else nodes.Text(part)
    return paragraph


def add_note(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Put the "Run this page yourself" note right after the page's banner (``doctree-resolved``).

    The note is folded: a ``<details>`` element whose one-line summary is :data:`NOTE_TITLE`, the
    text and the install command inside, so that with the one-line banner it takes two short
    lines above the page's first sentence (on a phone too). Only pages that run code have a
    banner (a cell tagged ``runinfo``); others get no note. It is added when the page is written,
    so that the address is the current build's.
    """
    if app.builder.format != "html":
        return
    banner = next(
        (
            node
            for node in doctree.findall(nodes.container)
            if "tag_runinfo" in node.get("classes", [])
        ),
        None,
    )
    if banner is None:
        return
    command = install_command(app)
    note = nodes.container("", classes=["remat-run-yourself"])
    note += nodes.raw("", f"<details><summary>{html.escape(NOTE_TITLE)}</summary>", format="html")
    note += _paragraph(NOTE_TEXT)
    note += nodes.literal_block(command, command, language="bash")
    note += nodes.raw("", "</details>", format="html")
    banner.parent.insert(banner.parent.index(banner) + 1, note)


def fill_wheel_url(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """Put this build's wheel address where a page's code says :data:`WHEEL_PLACEHOLDER`."""
    if app.builder.format != "html":
        return
    url = wheel_url(_base_url(app), app.confdir)
    code = list(doctree.findall(lambda n: isinstance(n, nodes.literal | nodes.literal_block)))
    for node in code:
        text = node.astext()
        if WHEEL_PLACEHOLDER not in text:
            continue
        filled = text.replace(WHEEL_PLACEHOLDER, url)
        # One text child, and the same raw source: Sphinx highlights a block only when they agree.
        node.children = [nodes.Text(filled)]
        node.rawsource = filled


def record_wheel_url(app: Sphinx, config: Any) -> None:
    """Keep the wheel's address as a configuration value (``config-inited``).

    Its rebuild category is "html": when the address changes (another version in
    pyproject.toml, another site address), Sphinx writes every page again, and with it every
    notebook's setup cell and every note, instead of leaving pages that name a wheel no longer
    served.
    """
    if config.html_baseurl:
        config.remat_wheel_url = wheel_url(config.html_baseurl, app.confdir)


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("remat_wheel_url", "", "html", types=[str])
    app.connect("config-inited", record_wheel_url)
    app.connect("builder-inited", serve_wheel)
    app.connect("doctree-resolved", add_note)
    app.connect("doctree-resolved", fill_wheel_url)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
