"""The package's shape (CONTRIBUTING.md, "Where things live"): one subpackage per section of the
site, the tools below them, tests mirroring the package, docstrings that list the modules as they
are, no import cycle, and no module past 450 lines."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "examples"
TESTS = ROOT / "tests"
DOCS = ROOT / "docs"
MAX_LINES = 450
#: The package's own folders that are not sections of the site.
TOOLS = "tools"
NOT_MODULES = {"data", "__pycache__"}


def _docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""


def _modules(package: Path) -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules([str(package)])
        if not info.name.startswith("_") or info.name == "__main__"
    )


def _subpackages() -> list[str]:
    return sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


def _sections() -> list[str]:
    """The site's sections: the folders of docs/ that hold pages."""
    return sorted(p.name for p in DOCS.iterdir() if p.is_dir() and any(p.glob("*.md")))


def _dotted(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The ``examples`` modules ``path`` imports, at any depth of the file (late imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("examples"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / Path(*full.split("."))).with_suffix(".py").is_file()
                is_package = (PACKAGE.parent / Path(*full.split(".")) / "__init__.py").is_file()
                found.add(full if is_module or is_package else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("examples")}
    return found


# --- every section has its subpackage, every module its test file -------------------------------


def test_every_section_of_the_site_has_its_subpackage():
    missing = [s for s in _sections() if s not in _subpackages()]
    assert missing == [], f"docs/{missing[0]}/ has no src/examples/{missing[0]}/__init__.py"


def test_the_package_holds_the_sections_and_the_tools_and_nothing_else():
    """Top level: the home page's module, the checker's command line, the subpackages."""
    top = {info.name for info in pkgutil.iter_modules([str(PACKAGE)])}
    assert top == {"check", "landing", "questions", *_subpackages()}, (
        "src/examples/ holds one subpackage per section of the site, tools/, landing.py (the "
        "home page), questions.py (the questions page) and check.py (the checker's command "
        f"line); found {sorted(top)}"
    )
    assert set(_subpackages()) == {*_sections(), TOOLS}, (
        f"every subpackage is a section of docs/ or {TOOLS}/: {_subpackages()}"
    )


def _expected_test_files() -> dict[str, Path]:
    """``examples/S/M.py`` -> ``tests/S/test_M.py`` (``__main__`` -> ``test_main.py``); a
    package's own code (``__init__.py`` and its private ``_M.py``) -> ``tests/S/test_S.py``."""
    expected: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = path.parent.relative_to(PACKAGE)
        if NOT_MODULES & set(folder.parts):
            continue
        name = path.stem
        if name == "__main__":
            expected[str(path.relative_to(PACKAGE))] = TESTS / folder / "test_main.py"
        elif not name.startswith("_"):
            expected[str(path.relative_to(PACKAGE))] = TESTS / folder / f"test_{name}.py"
        elif name != "__init__" and folder.parts:  # a private module: its package's test file
            expected[str(path.relative_to(PACKAGE))] = TESTS / folder / f"test_{folder.name}.py"
    return expected


def test_every_module_has_its_test_file_at_the_same_path():
    missing = {
        module: str(test.relative_to(ROOT))
        for module, test in _expected_test_files().items()
        if not test.is_file()
    }
    assert missing == {}, f"modules without their test file: {missing}"


def test_every_test_folder_mirrors_a_subpackage():
    folders = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and any(p.glob("test_*.py")))
    assert [f for f in folders if f not in _subpackages()] == []


def test_no_two_modules_share_a_name():
    seen: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.stem not in {"__init__", "__main__"}:
            seen.setdefault(path.stem.lstrip("_"), []).append(str(path.relative_to(PACKAGE)))
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


# --- imports: the tools import no section; no module imports itself back ------------------------


def test_the_tools_import_nothing_from_the_sections():
    upward = {
        str(path.relative_to(PACKAGE)): sorted(
            m for m in _imports(path) if not m.startswith(f"examples.{TOOLS}")
        )
        for path in (PACKAGE / TOOLS).glob("*.py")
    }
    assert {k: v for k, v in upward.items() if v} == {}


def _import_graph() -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        if "data" in path.relative_to(PACKAGE).parts:
            continue
        name = _dotted(path)
        # A package importing its own submodules (to re-export them) is not a cycle.
        graph[name] = {
            m
            for m in _imports(path)
            if m != name and not (path.name == "__init__.py" and m.startswith(f"{name}."))
        }
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state and (found := visit(dep, [*path, dep])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_no_module_imports_itself_back_through_others():
    cycle = _cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


# --- docstrings and size ------------------------------------------------------------------------


#: Packages whose docstring lists their modules: all but the problems, which are found by
#: discovery instead (tests/problems/test_problems.py checks that each has its page).
LISTING = ["", *(s for s in _subpackages() if s != "problems")]


@pytest.mark.parametrize("sub", LISTING, ids=lambda s: f"examples.{s}" if s else "examples")
def test_the_package_docstring_names_every_module(sub):
    package = PACKAGE / sub
    dotted = "examples" + (f".{sub}" if sub else "")
    text = _docstring(package)
    missing = [
        name
        for name in _modules(package)
        if f"{dotted}.{name}`" not in text and f"``{name}``" not in text
    ]
    assert missing == [], f"the docstring of {dotted} does not name {missing}"


def test_no_module_is_over_the_line_limit():
    long = {
        path.relative_to(PACKAGE).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines (split them by job): {long}"
