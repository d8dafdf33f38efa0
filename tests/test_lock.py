"""The lock under locks/: exact versions with hashes for every session, in step with the matrix.

`nox -s lock` writes these files (uv's universal resolution); every nox session installs from one
of them. These tests read the files as text and noxfile.py as Python source (nox itself is not
installed in the test environment).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest
from builtsite import ROOT, installed_from_lock
from packaging.markers import Marker

LOCKS = ROOT / "locks"
PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def noxfile_value(name: str) -> object:
    """A module-level constant of noxfile.py, read from its source."""
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    for node in tree.body:
        target = getattr(node, "target", None) or (getattr(node, "targets", None) or [None])[0]
        if isinstance(target, ast.Name) and target.id == name and node.value is not None:
            return ast.literal_eval(node.value)
    raise LookupError(f"noxfile.py defines no {name}")


def pins(path: Path, python: str | None = None) -> dict[str, str]:
    """The locked versions of a lock file, for one Python version where markers fork them."""
    found: dict[str, str] = {}
    env = {"python_full_version": f"{python}.0", "python_version": python} if python else None
    for line in path.read_text().splitlines():
        match = PIN.match(line)
        if not match:
            continue
        name, version, marker = match.groups()
        if marker and env is not None and not Marker(marker).evaluate(env):
            continue
        found[name.lower().split("[")[0]] = version
    return found


def lock_files() -> list[Path]:
    return sorted(LOCKS.rglob("*.txt"))


def test_every_session_kind_and_every_release_of_the_matrix_has_a_lock() -> None:
    locked = noxfile_value("LOCKED")
    assert isinstance(locked, dict)
    releases = noxfile_value("JAX_RELEASES")
    assert isinstance(releases, list)
    expected = {f"{name}.txt" for name in locked} | {
        f"matrix/jax-{jax}.txt" for _, jax, _, _ in releases
    }
    assert {p.relative_to(LOCKS).as_posix() for p in lock_files()} == expected


@pytest.mark.parametrize("path", lock_files(), ids=lambda p: p.relative_to(LOCKS).as_posix())
def test_each_requirement_is_an_exact_version_with_its_hashes(path: Path) -> None:
    text = path.read_text()
    assert "nox -s lock" in text.splitlines()[1], "made by `nox -s lock`"
    requirements = [line for line in text.splitlines() if line and not line.startswith((" ", "#"))]
    assert requirements
    for line in requirements:
        assert PIN.match(line), f"not an exact pin: {line}"
    # Each requirement is followed by at least one hash line.
    blocks = re.split(r"\n(?=[^\s#])", text.split("\n", 2)[2])
    for block in blocks:
        if block.strip() and not block.startswith("#"):
            assert "--hash=sha256:" in block, block.splitlines()[0]


def test_the_newest_release_of_the_matrix_is_the_one_the_lock_gives_the_site() -> None:
    """CI runs the newest release through `nox -s tests` (the lock's) instead of a matrix run."""
    releases = noxfile_value("JAX_RELEASES")
    assert isinstance(releases, list)
    python, jax, flax, tags = releases[-1]
    assert "jax-newest" in tags
    for name in ("test", "docs", "notebooks"):
        locked = pins(LOCKS / f"{name}.txt", python)
        assert (locked["jax"], locked["jaxlib"], locked["flax"]) == (jax, jax, flax), name


def test_python_3_11_gets_the_release_of_the_matrix_that_ci_runs_as_its_leg() -> None:
    releases = noxfile_value("JAX_RELEASES")
    assert isinstance(releases, list)
    (leg,) = [r for r in releases if "jax-py311" in r[3]]
    locked = pins(LOCKS / "test.txt", "3.11")
    assert (locked["jax"], locked["flax"]) == (leg[1], leg[2])


def test_this_environment_has_what_the_lock_says() -> None:
    """What nox installed here is the lock's, for this Python (a fresh machine gets the same)."""
    if not installed_from_lock():
        pytest.skip("not an environment that nox installed from the lock (tests-installed, say)")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    locked = pins(LOCKS / "test.txt", python)
    for name in ("jax", "jaxlib", "flax", "numpy", "sphinx", "myst-nb"):
        if name in locked:
            assert importlib.metadata.version(name) == locked[name], name
