"""The page conventions of CONTRIBUTING.md, and what the build does with a cell that fails.

Every page under docs/ that has code cells declares itself a MyST text notebook (jupytext front
matter and a Python 3 kernelspec) and opens with the runinfo banner, so that a reader always sees
which versions produced its outputs. A raising cell fails the build and the message names the page
and shows the cell, unless the cell is tagged `raises-exception`.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```\s*$", re.S | re.M)


def _pages_with_code() -> list[Path]:
    return sorted(
        p
        for p in DOCS.rglob("*.md")
        if not p.relative_to(DOCS).as_posix().startswith(("_", "jupyter_execute"))
        and CODE_CELL.search(p.read_text(encoding="utf-8"))
    )


PAGES = _pages_with_code()


def _front_matter(text: str) -> str:
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    return match.group(1) if match else ""


def _cell(body: str) -> tuple[list[str], str]:
    """(tags, code) of a code cell's body; tags from its `:tags: [...]` option line."""
    tags = re.search(r"^:tags:\s*\[(.*?)\]\s*$", body, re.M)
    code = "\n".join(line for line in body.splitlines() if not line.startswith(":"))
    names = [t.strip().strip("'\"") for t in tags.group(1).split(",")] if tags else []
    return names, code.strip()


def _first_cell(text: str) -> tuple[list[str], str]:
    """(tags, code) of the first code cell."""
    return _cell(CODE_CELL.search(text).group("body"))


#: Pages whose kernel needs a setting before JAX's backend starts, which the banner's
#: `jax.devices()` would start: page -> the exact code of the one cell allowed before the banner.
#: The banner is then the second cell. Every other page opens with the banner.
BEFORE_BANNER = {
    "howto/sharded-step.md": (
        'import jax\n\njax.config.update("jax_num_cpu_devices", 8)'
        "  # before anything starts JAX's backend"
    ),
}


def test_there_are_pages_with_code():
    assert any(p.name == "index.md" and p.parent == DOCS for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_page_is_a_myst_text_notebook(page):
    front = _front_matter(page.read_text(encoding="utf-8"))
    assert front, f"{page.name} has code cells but no front matter (see CONTRIBUTING.md)"
    assert re.search(r"^jupytext:\s*$", front, re.M), "front matter lacks `jupytext:`"
    assert re.search(r"^\s+format_name:\s*myst\s*$", front, re.M), "jupytext format is not myst"
    assert re.search(r"^\s+extension:\s*\.md\s*$", front, re.M), "jupytext extension is not .md"
    assert re.search(r"^kernelspec:\s*$", front, re.M), "front matter lacks `kernelspec:`"
    assert re.search(r"^\s+name:\s*python3\s*$", front, re.M), "kernelspec name is not python3"
    assert re.search(r"^\s+language:\s*python\s*$", front, re.M), "kernelspec is not Python"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(DOCS).as_posix())
def test_first_cell_is_the_runinfo_banner(page):
    text = page.read_text(encoding="utf-8")
    before = BEFORE_BANNER.get(page.relative_to(DOCS).as_posix())
    if before is None:
        tags, code = _first_cell(text)
    else:
        cells = [_cell(m.group("body")) for m in CODE_CELL.finditer(text)]
        assert cells[0][1] == before, f"the first cell of {page.name} is not the one allowed"
        assert "runinfo" not in cells[0][0]
        tags, code = cells[1]
    assert "runinfo" in tags, f"the first cell of {page.name} is not the runinfo banner"
    assert "remove-input" in tags, "the banner's code should not show (tag remove-input)"
    assert code == "from examples.tools.runinfo import banner\nbanner()"


def test_the_banner_is_one_short_line_of_versions():
    """The banner leaves the first screen to the page: one line, the versions and no more
    (reader finding T8; the "Run this page yourself" note under it is folded, test_takehome)."""
    from examples.tools.runinfo import Banner, RunInfo

    info = RunInfo("0.12.0.1", "0.12.0.1", "0.12.12", "3.12.1", "gpu", "NVIDIA H100 80GB HBM3", 8)
    shown = Banner(info)._repr_html_()
    text = re.sub(r"<[^>]+>", "", shown)
    assert text == f"Executed with {info.one_line()}"
    assert shown.count("<p") == 1
    assert len(text) <= 125, len(text)  # two short lines on a phone


def test_parsers_see_a_page_without_the_banner():
    """The checks above do fail on a page that breaks the conventions."""
    page = textwrap.dedent(
        """\
        # No front matter

        ```{code-cell} ipython3
        print("hello")
        ```
        """
    )
    assert _front_matter(page) == ""
    assert _first_cell(page) == ([], 'print("hello")')


# --- A failing cell fails the build ---------------------------------------------------------------

FRONT = textwrap.dedent(
    """\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    """
)


def _throwaway_site(tmp_path: Path, tags: str) -> Path:
    """A two-page docs folder whose second page has a raising cell (tagged as given)."""
    source = tmp_path / "docs"
    source.mkdir()
    (source / "index.md").write_text(
        "# Throwaway\n\n```{toctree}\nexplodes\n```\n", encoding="utf-8"
    )
    (source / "explodes.md").write_text(
        FRONT
        + "\n# A page that raises\n\n"
        + "```{code-cell} ipython3\n"
        + (f":tags: [{tags}]\n" if tags else "")
        + 'def detonate():\n    raise ValueError("boom")\n\n\ndetonate()\n```\n',
        encoding="utf-8",
    )
    return source


def _build(sphinx_build, tmp_path: Path, tags: str) -> subprocess.CompletedProcess:
    """Build the throwaway site, warnings as errors, as `nox -s docs` does."""
    source = _throwaway_site(tmp_path, tags)
    return sphinx_build(
        source, tmp_path / "html", env={"REMAT_GUIDE_BUILD_DIR": str(tmp_path / "build")}
    )


@pytest.mark.slow
def test_a_raising_cell_fails_the_build_and_names_the_page(sphinx_build, tmp_path):
    result = _build(sphinx_build, tmp_path, "")
    output = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)  # IPython's colours
    assert result.returncode != 0, output[-4000:]
    assert "explodes.md" in output, "the failure does not name the page"
    assert "Executing notebook failed" in output
    assert 'raise ValueError("boom")' in output, "the failure does not show the cell"
    assert "ValueError: boom" in output


@pytest.mark.slow
def test_a_cell_tagged_raises_exception_shows_its_error(sphinx_build, tmp_path):
    result = _build(sphinx_build, tmp_path, "raises-exception")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    page = (tmp_path / "html" / "explodes.html").read_text(encoding="utf-8")
    assert "ValueError" in page
    assert "boom" in page


#: The site's wrappers that once stood where JAX's own calls belong (issue 12): a page shows
#: jax.checkpoint(f, policy=...), print_saved_residuals, nn.remat and nnx.remat themselves.
RETIRED_WRAPPERS = re.compile(r"\b(under_policy|forward_under|policies\.show|Raised)\b")


def test_no_page_or_module_brings_back_a_retired_wrapper():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in [*PAGES, *sorted((ROOT / "src" / "examples").rglob("*.py"))]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if RETIRED_WRAPPERS.search(line) and not line.lstrip().startswith(('"""', "#", "Raised in"))
    ]
    assert found == []


def _fingerprint_function(root: Path):
    """conf.py's `_examples_fingerprint`, run against another root (importing conf.py itself would
    prune the execution caches of the real build)."""
    import ast
    import hashlib
    import importlib.metadata

    source = (Path(__file__).parents[1] / "conf.py").read_text(encoding="utf-8")
    (node,) = [
        n
        for n in ast.parse(source).body
        if isinstance(n, ast.FunctionDef) and n.name == "_examples_fingerprint"
    ]
    namespace = {"ROOT": root, "hashlib": hashlib, "importlib": importlib}
    assert importlib.metadata  # the function reads the installed releases through it
    exec(compile(ast.Module([node], []), "conf.py", "exec"), namespace)
    return namespace["_examples_fingerprint"]


def test_the_execution_cache_misses_when_code_or_data_of_the_package_changes(tmp_path):
    """A page reads the package's code and its data files (the release records): a change to
    either must re-execute the pages, so both are in the cache's fingerprint."""
    package = tmp_path / "src" / "examples"
    (package / "data").mkdir(parents=True)
    (package / "module.py").write_text("X = 1\n")
    (package / "data" / "record.json").write_text('{"passed": 810}\n')
    fingerprint = _fingerprint_function(tmp_path)
    first = fingerprint()
    assert fingerprint() == first
    (package / "data" / "record.json").write_text('{"passed": 819}\n')
    after_data = fingerprint()
    assert after_data != first
    (package / "module.py").write_text("X = 2\n")
    assert fingerprint() not in (first, after_data)
