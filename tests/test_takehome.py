"""Pages run outside the repository (docs/_ext/take_home.py, docs/_tools/run_notebooks.py).

- Every build serves the project's wheel at one URL, reproducibly, and the wheel installs.
- Every downloadable notebook opens with the setup cell, which installs that wheel where the
  package is missing and does nothing where it is importable (run here in IPython, with pip
  replaced by a recorder).
- The runner of `nox -s notebooks` finds, stages and runs notebooks and reports failures.
- Pages that read files beside their source in the repository are listed (they show less, or
  fail, off the site).

Tests of the built site read REMAT_GUIDE_HTML (default _build/html) and skip where there is none.
"""

from __future__ import annotations

import argparse
import ast
import html
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import types
import zipfile
from pathlib import Path

import pytest
from builtsite import HTML, ROOT, hosted_path

EXT = ROOT / "docs" / "_ext"
TOOLS = ROOT / "docs" / "_tools"
DOCS = ROOT / "docs"


def _load(name: str, folder: Path = EXT) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def take_home() -> types.ModuleType:
    for module in ("sphinx", "docutils"):
        pytest.importorskip(module, reason="needs the docs dependency group")
    return _load("take_home")


@pytest.fixture(scope="module")
def runner() -> types.ModuleType:
    return _load("run_notebooks", TOOLS)


BASE = "https://example.org/guide/"


def _app(base: str = BASE) -> types.SimpleNamespace:
    """What take_home reads of a Sphinx application."""
    return types.SimpleNamespace(confdir=str(ROOT), config=types.SimpleNamespace(html_baseurl=base))


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


DIST = _pyproject()["project"]["name"]


# --- The wheel ----------------------------------------------------------------------------------


def test_wheel_name_and_url_follow_pyproject(take_home):
    project = _pyproject()["project"]
    name = take_home.wheel_name(ROOT)
    assert name == f"jax_remat_guide_examples-{project['version']}-py3-none-any.whl"
    assert name.startswith(project["name"].replace("-", "_") + "-")
    url = take_home.wheel_url(BASE, ROOT)
    assert url == f"{BASE}_static/wheels/{name}"
    assert take_home.wheel_url(BASE.rstrip("/"), ROOT) == url


@pytest.fixture(scope="module")
def built_wheels(take_home, tmp_path_factory) -> list[Path]:
    """The project's wheel, built twice into separate folders."""
    pytest.importorskip("hatchling", reason="building the wheel needs hatchling")
    return [take_home.build_wheel(ROOT, tmp_path_factory.mktemp(f"wheel{i}")) for i in range(2)]


def test_two_wheel_builds_are_identical(built_wheels):
    first, second = built_wheels
    assert first.name == second.name
    assert first.read_bytes() == second.read_bytes()


def test_wheel_holds_the_package_and_the_checker_script(built_wheels, take_home):
    with zipfile.ZipFile(built_wheels[0]) as wheel:
        names = set(wheel.namelist())
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(info).decode()
        entry_points = wheel.read(info.replace("METADATA", "entry_points.txt")).decode()
    package = {
        p.relative_to(ROOT / "src").as_posix()
        for p in (ROOT / "src" / "examples").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert package <= names, sorted(package - names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    name, version = take_home.project(ROOT)
    assert f"\nName: {name}\n" in metadata
    assert f"\nVersion: {version}\n" in metadata
    assert re.search(r"^remat-check = examples\.check:main$", entry_points, re.M)


def test_a_missing_build_backend_is_named(take_home, tmp_path, monkeypatch):
    """Without hatchling the build stops with a message that says what to install."""
    from sphinx.errors import ExtensionError

    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "hatchling").mkdir()
    (blocker / "hatchling" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'hatchling'\")\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(blocker))
    with pytest.raises(ExtensionError, match=r"pip install hatchling"):
        take_home.build_wheel(ROOT, tmp_path / "out")


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_environment(built_wheels, tmp_path):
    """`pip install --no-deps WHEEL` in a new venv gives the package and the remat-check script."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(built_wheels[0])],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    probe = (
        "import examples, importlib.metadata as m; print(examples.__file__); "
        f"print(m.version({DIST!r}))"
    )
    shown = subprocess.run(
        [str(python), "-I", "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=True
    ).stdout.splitlines()
    assert Path(shown[0]).is_relative_to(venv), shown[0]
    assert shown[1] == _pyproject()["project"]["version"]
    assert (venv / "bin" / "remat-check").is_file()


# --- The setup cell -----------------------------------------------------------------------------


def test_setup_cell_names_the_wheel_and_comes_first_once(take_home):
    app = _app()
    cell = take_home.setup_cell(app)
    source = "".join(cell["source"])
    assert cell["cell_type"] == "code"
    assert cell["id"] == take_home.SETUP_ID
    assert take_home.SETUP_TAG in cell["metadata"]["tags"]
    assert f'"{take_home.wheel_url(BASE, ROOT)}"' in source
    assert f'RELEASE = "{_pyproject()["project"]["version"]}"' in source
    assert '%pip install --quiet "{WHEEL}" matplotlib' in source
    notebook = {
        "cells": [{"cell_type": "code", "id": "cell-0"}, {"cell_type": "markdown", "id": "cell-1"}]
    }
    once = take_home.with_setup_cell(app, notebook)
    twice = take_home.with_setup_cell(app, once)
    assert [c["id"] for c in once["cells"]] == [take_home.SETUP_ID, "cell-0", "cell-1"]
    assert twice == once
    assert (
        take_home.install_command(app)
        == f'pip install "{take_home.wheel_url(BASE, ROOT)}" matplotlib'
    )


#: Runs a setup cell in IPython with the `pip` magic replaced by a recorder, where the modules
#: and distributions named in argv[2] and argv[3] look absent to the calls the cell makes; then
#: calls glue as a page does. Prints what happened as JSON.
SHELL = textwrap.dedent(
    """\
    import importlib.metadata, importlib.util, json, sys
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    modules, distributions = (set(filter(None, a.split(","))) for a in sys.argv[2:4])
    real_find_spec, real_version = importlib.util.find_spec, importlib.metadata.version

    def find_spec(name, package=None):
        top = name.split(".")[0]
        if top in modules:
            if "." in name:  # finding a submodule imports its parent first
                raise ModuleNotFoundError(f"No module named {top!r}", name=top)
            return None
        return real_find_spec(name, package)

    def version(name):
        if name in distributions:
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    importlib.util.find_spec, importlib.metadata.version = find_spec, version
    shell = InteractiveShell.instance()
    calls = []
    shell.register_magic_function(lambda line: calls.append(line), "line", "pip")
    with capture_output() as captured:
        ok = shell.run_cell(open(sys.argv[1]).read()).success
        after = shell.run_cell(
            "from myst_nb import glue\\n"
            "glue('shown', 'VALUE-SHOWN')\\n"
            "glue('hidden', 'VALUE-HIDDEN', display=False)\\n"
        ).success
    standin = not hasattr(sys.modules.get("myst_nb"), "__file__")
    shown = captured.stdout + "".join(str(o.data.get("text/plain")) for o in captured.outputs)
    print(json.dumps({"ok": ok, "after": after, "pip": calls, "standin": standin, "shown": shown}))
    """
)


def _run_setup_cell(
    take_home,
    tmp_path: Path,
    *,
    absent: tuple[str, ...] = (),
    absent_dists: tuple[str, ...] = (),
    replace: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> dict:
    source = "".join(take_home.setup_cell(_app())["source"])
    for old, new in (replace or {}).items():
        assert old in source
        source = source.replace(old, new)
    cell, script = tmp_path / "cell.py", tmp_path / "shell.py"
    cell.write_text(source, encoding="utf-8")
    script.write_text(SHELL, encoding="utf-8")
    full_env = {k: v for k, v in os.environ.items() if k != take_home.WHEEL_VARIABLE}
    result = subprocess.run(
        [sys.executable, str(script), str(cell), ",".join(absent), ",".join(absent_dists)],
        capture_output=True,
        text=True,
        env=full_env | (env or {}),
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["ok"], seen
    assert seen["after"], seen
    return seen


@pytest.fixture
def ipython():
    pytest.importorskip("IPython")


def test_setup_cell_does_nothing_where_the_package_is_installed(take_home, tmp_path, ipython):
    pytest.importorskip("myst_nb")
    seen = _run_setup_cell(take_home, tmp_path)
    assert seen["pip"] == []
    assert seen["standin"] is False  # myst-nb is installed here: its glue stays


def test_setup_cell_does_nothing_in_a_clone_without_an_install(take_home, tmp_path, ipython):
    """No distribution installed, but `examples` on the path (PYTHONPATH=src in a clone)."""
    seen = _run_setup_cell(take_home, tmp_path, absent_dists=(DIST,))
    assert seen["pip"] == []


def test_setup_cell_installs_the_wheel_where_the_package_is_missing(take_home, tmp_path, ipython):
    seen = _run_setup_cell(take_home, tmp_path, absent=("examples",), absent_dists=(DIST,))
    assert seen["pip"] == [f'install --quiet "{take_home.wheel_url(BASE, ROOT)}" matplotlib']


def test_setup_cell_installs_where_matplotlib_is_missing(take_home, tmp_path, ipython):
    seen = _run_setup_cell(take_home, tmp_path, absent=("matplotlib",))
    assert seen["pip"] == [f'install --quiet "{take_home.wheel_url(BASE, ROOT)}" matplotlib']


def test_setup_cell_installs_over_another_release(take_home, tmp_path, ipython):
    version = _pyproject()["project"]["version"]
    seen = _run_setup_cell(
        take_home, tmp_path, replace={f'RELEASE = "{version}"': 'RELEASE = "0.0.0.dev0"'}
    )
    assert seen["pip"] == [f'install --quiet "{take_home.wheel_url(BASE, ROOT)}" matplotlib']


def test_setup_cell_takes_the_wheel_from_the_environment_variable(take_home, tmp_path, ipython):
    wheel = str(tmp_path / "local.whl")
    seen = _run_setup_cell(
        take_home,
        tmp_path,
        absent=("examples",),
        absent_dists=(DIST,),
        env={take_home.WHEEL_VARIABLE: wheel},
    )
    assert seen["pip"] == [f'install --quiet "{wheel}" matplotlib']


def test_setup_cell_stands_in_for_glue_without_myst_nb(take_home, tmp_path, ipython):
    """glue(name, value) shows the value; glue(..., display=False) shows nothing."""
    seen = _run_setup_cell(take_home, tmp_path, absent=("myst_nb",))
    assert seen["pip"] == []
    assert seen["standin"] is True
    assert "VALUE-SHOWN" in seen["shown"]
    assert "VALUE-HIDDEN" not in seen["shown"]


# --- The runner of `nox -s notebooks` -----------------------------------------------------------


def _notebook(cells: list[dict], setup: dict | None) -> dict:
    return {
        "cells": ([setup] if setup else []) + cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _code(source: str, number: int, tags: tuple[str, ...] = ()) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": f"cell-{number}",
        "metadata": {"tags": list(tags)},
        "outputs": [],
        "source": source,
    }


def _fake_site(tmp_path: Path, notebooks: dict[str, dict], wheels: int = 1) -> Path:
    site = tmp_path / "html"
    for name, notebook in notebooks.items():
        path = site / "_sources" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(notebook), encoding="utf-8")
    (site / "_static" / "wheels").mkdir(parents=True)
    for i in range(wheels):
        (site / "_static" / "wheels" / f"pkg-{i}-py3-none-any.whl").write_bytes(b"")
    return site


SETUP = {
    "cell_type": "code",
    "id": "remat-guide-setup",
    "metadata": {},
    "outputs": [],
    "source": "pass",
}


def test_runner_finds_the_notebooks_and_the_one_wheel(runner, tmp_path):
    site = _fake_site(
        tmp_path,
        {"index.ipynb": _notebook([], SETUP), "tutorial/a.ipynb": _notebook([], SETUP)},
    )
    assert runner.site_notebooks(site) == ["index.ipynb", "tutorial/a.ipynb"]
    assert runner.site_notebooks(site, ["tutorial/*"]) == ["tutorial/a.ipynb"]
    with pytest.raises(runner.RunError, match="no notebook"):
        runner.site_notebooks(site, ["nothing/*"])
    with pytest.raises(runner.RunError, match="nox -s docs"):
        runner.site_notebooks(tmp_path / "nowhere")
    assert runner.site_wheel(site).name == "pkg-0-py3-none-any.whl"
    with pytest.raises(runner.RunError, match="2 wheels"):
        runner.site_wheel(_fake_site(tmp_path / "two", {}, wheels=2))


def test_runner_stages_each_notebook_alone_and_refuses_one_without_setup_cell(runner, tmp_path):
    site = _fake_site(
        tmp_path,
        {
            "index.ipynb": _notebook([], SETUP),
            "explorer/index.ipynb": _notebook([], SETUP),
            "old.ipynb": _notebook([_code("pass", 0)], None),
        },
    )
    staged = runner.stage(site, ["explorer/index.ipynb", "index.ipynb"], tmp_path / "work")
    assert [p.relative_to(tmp_path / "work").as_posix() for p in staged] == [
        "01-explorer-index/index.ipynb",
        "02-index/index.ipynb",
    ]
    assert all(sorted(p.parent.iterdir()) == [p] for p in staged)
    with pytest.raises(runner.RunError, match="does not start with the setup cell"):
        runner.stage(site, ["old.ipynb"], tmp_path / "work2")


def test_runner_environment_leaves_the_repository_out(runner, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src"))
    wheel = tmp_path / "w.whl"
    env = runner.reader_environment(tmp_path, wheel)
    assert "PYTHONPATH" not in env
    assert env[runner.WHEEL_VARIABLE] == str(wheel.resolve())
    assert env["JUPYTER_PATH"] == str(tmp_path / "jupyter")
    assert runner.outside_repository(tmp_path)
    assert not runner.outside_repository(ROOT / "docs")
    runner.write_kernelspec(tmp_path / "jupyter")
    spec = json.loads(
        (tmp_path / "jupyter" / "kernels" / runner.KERNEL / "kernel.json").read_text()
    )
    assert spec["argv"][:3] == [sys.executable, "-m", "ipykernel_launcher"]


def test_runner_helpers_report_and_compare(runner, tmp_path):
    assert runner.error_summary("\x1b[31mValueError\x1b[0m: boom\n") == "ValueError: boom"
    wheel = tmp_path / "w.whl"
    wheel.write_bytes(b"")
    assert runner.same_file(wheel.resolve().as_uri(), wheel)
    assert not runner.same_file("https://example.org/w.whl", wheel)
    assert not runner.same_file(None, wheel)
    table = runner.report(
        [runner.Result("a.ipynb", 1.0), runner.Result("b/c.ipynb", 2.5, "ValueError: boom")], 3.5
    )
    assert table.splitlines()[0].endswith("ok")
    assert table.splitlines()[1].endswith("FAILED")
    assert table.splitlines()[-1] == "2 notebooks in 4 s: 1 ran, 1 failed"


def test_runner_refuses_a_job_count_below_one(runner):
    for text in ("0", "-2", "two"):
        with pytest.raises(argparse.ArgumentTypeError, match="at least 1"):
            runner._positive(text)
    assert runner._positive("3") == 3


def test_the_setup_cell_ids_agree(take_home, runner):
    assert runner.SETUP_ID == take_home.SETUP_ID
    assert runner.WHEEL_VARIABLE == take_home.WHEEL_VARIABLE


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_runner_runs_notebooks_and_reports_the_one_that_fails(runner, take_home, tmp_path, jobs):
    """Two notebooks with the real setup cell: one runs (its expected error allowed), one fails;
    one at a time, or the second in a process pool (the first always runs alone)."""
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    setup = take_home.setup_cell(_app())
    good = [
        _code("print(open('hello.txt', 'w').write('x'))", 0),
        _code("raise KeyError('expected')", 1, ("raises-exception",)),
        _code("from myst_nb import glue\nglue('k', 1, display=False)", 2),
        _code("import os\nopen('env.txt', 'w').write(os.environ.get('REMAT_GUIDE_PROBE', '-'))", 3),
    ]
    bad = [_code("import examples\nraise ValueError('boom from the notebook')", 0)]
    site = _fake_site(
        tmp_path, {"good.ipynb": _notebook(good, setup), "bad.ipynb": _notebook(bad, setup)}
    )
    keep = tmp_path / "kept"
    result = subprocess.run(
        [
            sys.executable,
            str(TOOLS / "run_notebooks.py"),
            str(site),
            "--allow-installed",
            "--keep",
            str(keep),
            "--jobs",
            jobs,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        # The kernels see the caller's environment (JAX's compilation cache is set there).
        env={**os.environ, "REMAT_GUIDE_PROBE": "from the caller"},
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "bad.ipynb: FAILED" in out
    assert "ValueError: boom from the notebook" in out
    assert "good.ipynb: ok" in out
    assert re.search(r"^2 notebooks in \d+ s: 1 ran, 1 failed$", out, re.M), out
    # Each notebook ran in its own folder outside the repository; nothing was written here.
    assert (keep / "02-good" / "hello.txt").is_file()
    assert (keep / "02-good" / "env.txt").read_text() == "from the caller"
    assert not (ROOT / "hello.txt").exists()


# --- Pages that read files beside their source ---------------------------------------------------

#: Pages whose code names a file or folder relative to the page's place in the repository. A
#: downloaded notebook has none of them: the explorer and the sharded-step page then show no
#: runs from other machines, and the problem pages' checker reports "no such file". Each is to
#: read its data through the package (package data in the wheel); fix one, then remove it here.
REPOSITORY_READS: dict[str, set[str]] = {}

CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(?P<body>.*?)^```\s*$", re.S | re.M)


def repository_reads(page: Path) -> set[str]:
    """String literals in the page's code cells that name a path beside the page's source."""
    found = set()
    for match in CODE_CELL.finditer(page.read_text(encoding="utf-8")):
        lines = [
            line
            for line in match.group("body").splitlines()
            if not line.startswith(":") and not line.lstrip().startswith(("%", "!"))
        ]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            text = node.value
            plausible = text.strip(". /") and "\n" not in text and len(text) < 200
            if plausible and (page.parent / text).exists():
                found.add(text)
    return found


def test_the_finder_sees_a_path_beside_a_page(tmp_path):
    (tmp_path / "data").mkdir()
    page = tmp_path / "page.md"
    page.write_text('```{code-cell} ipython3\nload("data")\nprint("elsewhere")\n```\n')
    assert repository_reads(page) == {"data"}


def test_pages_that_read_files_beside_their_source_are_known():
    pages = [p for p in DOCS.rglob("*.md") if not p.relative_to(DOCS).as_posix().startswith("_")]
    found = {p.relative_to(DOCS).as_posix(): reads for p in pages if (reads := repository_reads(p))}
    assert found == REPOSITORY_READS


# --- The built site ------------------------------------------------------------------------------


def _built_site() -> Path:
    if not (HTML / "index.html").is_file():
        pytest.skip(f"no built site at {HTML}: build it first (`nox -s docs`)")
    return HTML


def _banner_pages(site: Path) -> list[Path]:
    return sorted(
        p
        for p in site.rglob("*.html")
        if not p.relative_to(site).as_posix().startswith("_")
        and "tag_runinfo" in p.read_text(encoding="utf-8")
    )


def _site_url(site: Path) -> str:
    page = (site / "index.html").read_text(encoding="utf-8")
    canonical = re.search(r'<link rel="canonical" href="([^"]+)"', page)
    assert canonical is not None
    return canonical.group(1)[: -len("index.html")]


def test_the_site_serves_one_wheel_at_the_documented_url(take_home):
    site = _built_site()
    wheels = sorted((site / "_static" / "wheels").glob("*.whl"))
    assert [w.name for w in wheels] == [take_home.wheel_name(ROOT)]
    with zipfile.ZipFile(wheels[0]) as wheel:
        assert "examples/__init__.py" in wheel.namelist()
    assert hosted_path(site).endswith("/")


def test_every_notebook_opens_with_the_setup_cell_for_the_sites_wheel(take_home):
    site = _built_site()
    url = take_home.wheel_url(_site_url(site), ROOT)
    pages = _banner_pages(site)
    assert pages, "no page of the built site has a banner"
    for page in pages:
        name = page.relative_to(site).with_suffix(".ipynb").as_posix()
        notebook = json.loads((site / "_sources" / name).read_text(encoding="utf-8"))
        first, *rest = notebook["cells"]
        assert first["id"] == take_home.SETUP_ID, name
        assert f'"{url}"' in "".join(first["source"]), name
        ids = [c["id"] for c in rest]
        assert ids == [f"cell-{i}" for i in range(len(rest))], name
        assert not any(c["id"] == take_home.SETUP_ID for c in rest)


def test_every_page_with_a_banner_shows_the_install_command_after_it(take_home):
    site = _built_site()
    command = take_home.install_command(_app(_site_url(site)))
    for page in _banner_pages(site):
        text = page.read_text(encoding="utf-8")
        notes = [m.start() for m in re.finditer(r'<div class="[^"]*\bremat-run-yourself\b', text)]
        assert len(notes) == 1, page.name
        banner = text.find("tag_runinfo")
        # Right after the banner: no other cell, heading or prose between them.
        between = text[banner : notes[0]]
        assert banner > 0, page.name
        assert 'class="cell ' not in between, page.name
        assert not re.search(r"<(h\d|section)\b", between), page.name
        shown = html.unescape(
            re.sub(r"<[^>]+>", "", text[notes[0] : text.find("</pre>", notes[0])])
        )
        assert take_home.NOTE_TITLE in shown
        assert take_home.NOTE_TEXT.replace("`", "") in " ".join(shown.split())
        assert command in shown, page.name
        # Folded to its one-line title, which comes before the text and the command.
        folded = text[notes[0] : text.find("</pre>", notes[0])]
        summary = f"<details><summary>{take_home.NOTE_TITLE}</summary>"
        assert folded.find(summary) > 0, page.name
        assert folded.find(summary) < folded.find("<p>") < folded.find("<pre")


def test_the_note_is_folded_right_after_the_banner(take_home):
    """add_note on a doctree with a banner cell: the next node is the note, a <details> whose
    summary is the title and which holds the text and the command; no banner, no note."""
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    def page(with_banner: bool) -> nodes.document:
        document = new_document("page", get_default_settings(Parser))
        section = nodes.section()
        section += nodes.title("Title", "Title")
        if with_banner:
            section += nodes.container("", classes=["cell", "tag_runinfo"])
        section += nodes.paragraph("First sentence.", "First sentence.")
        document += section
        return document

    app = _app()
    app.builder = types.SimpleNamespace(format="html")
    document = page(with_banner=True)
    take_home.add_note(app, document, "page")
    section = document[0]
    banner = next(n for n in section.children if "tag_runinfo" in n.get("classes", []))
    note = section[section.index(banner) + 1]
    assert "remat-run-yourself" in note["classes"]
    opening, text, command, closing = note.children
    assert isinstance(opening, nodes.raw)
    assert opening.astext() == f"<details><summary>{take_home.NOTE_TITLE}</summary>"
    assert " open" not in opening.astext()
    assert text.astext() == take_home.NOTE_TEXT.replace("`", "")
    assert command.astext() == take_home.install_command(app)
    assert closing.astext() == "</details>"
    assert section[section.index(note) + 1].astext() == "First sentence."

    bare = page(with_banner=False)
    take_home.add_note(app, bare, "page")
    assert not [n for n in bare.findall(nodes.container) if "remat-run-yourself" in n["classes"]]


def test_the_wheel_placeholder_becomes_the_wheels_address(take_home):
    app = _app()
    url = take_home.wheel_url(BASE, ROOT)
    text = f"install `{take_home.WHEEL_PLACEHOLDER}` now"
    notebook = {"cells": [{"cell_type": "markdown", "id": "cell-0", "source": [text]}]}
    (_, cell) = take_home.with_setup_cell(app, notebook)["cells"]
    assert cell["source"] == f"install `{url}` now"


def test_no_built_page_or_notebook_shows_the_wheel_placeholder(take_home):
    site = _built_site()
    url = take_home.wheel_url(_site_url(site), ROOT)
    problems = (site / "problems" / "index.html").read_text(encoding="utf-8")
    assert f'pip install "{url}"' in html.unescape(re.sub(r"<[^>]+>", "", problems))
    for path in [*site.rglob("*.html"), *(site / "_sources").rglob("*.ipynb")]:
        assert take_home.WHEEL_PLACEHOLDER not in path.read_text(encoding="utf-8"), path.name


def test_binder_buttons_open_the_pages_source_and_colab_is_left_out():
    site = _built_site()
    pages = _banner_pages(site)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "colab.research.google.com" not in text, page.name
        links = re.findall(r'href="(https://mybinder\.org/v2/gh/[^"]+)"', text)
        if not links:
            pytest.skip("no launch buttons: the repository URL is not on GitHub in this build")
        (link,) = links
        path = link.split("urlpath=lab/tree/", 1)[1]
        assert (ROOT / path).is_file(), link
        assert path == "docs/" + page.relative_to(site).with_suffix(".md").as_posix()


def test_binder_environment_has_what_the_pages_import():
    requirements = (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8")
    lines = {line.split("#")[0].strip() for line in requirements.splitlines()} - {""}
    names = {re.split(r"[<>=!~\[ ]", line)[0] for line in lines}
    assert "." in names  # the package, from the repository Binder checked out
    assert {"matplotlib", "myst-nb", "jupytext"} <= names
    runtime = (ROOT / "binder" / "runtime.txt").read_text(encoding="utf-8").strip()
    minimum = _pyproject()["project"]["requires-python"].removeprefix(">=")
    assert tuple(map(int, runtime.removeprefix("python-").split("."))) >= tuple(
        map(int, minimum.split("."))
    )
    post_build = ROOT / "binder" / "postBuild"
    assert os.access(post_build, os.X_OK)
    assert "jupytext-config set-default-viewer markdown" in post_build.read_text(encoding="utf-8")
