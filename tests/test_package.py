"""The package's shape: its docstrings list its modules as they are, and no module grows past 450
lines (CONTRIBUTING.md: one job, one place)."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "examples"
MAX_LINES = 450
#: Packages whose docstring lists their modules. (The problems are found by discovery instead:
#: tests/test_problems.py checks that every problem module has its page.)
LISTING = ["", "howto", "explorer"]


def _docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""


def _modules(package: Path) -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules([str(package)])
        if not info.name.startswith("_") or info.name == "__main__"
    )


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
