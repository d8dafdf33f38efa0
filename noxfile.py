#!/usr/bin/env -S uv run --script
# /// script
# dependencies = ["nox>=2025.2.9"]
# ///
"""Build, test and check the JAX Remat Guide.

    nox -s docs                 build the site into _build/html (cells executed, cached)
    nox -s tests                pytest on CPU jaxlib, or on CUDA jaxlib where a GPU is visible
    nox -s tests-cpu            pytest on CPU jaxlib, always
    nox -s tests-cuda           pytest on JAX's CUDA wheels; stops at once when no GPU is visible
    nox -s tests-installed      pytest in the current environment, installing nothing
    nox -s browser              the built site in Chromium (after `nox -s docs`)
    nox -s notebooks            the built site's notebooks, run outside the repository
    nox -s lighthouse           Lighthouse's mobile scores of every page, against the budget
    nox -s check -- PROBLEM FILE   check a solution to one of the site's problems
    nox -s serve                live rebuild on http://127.0.0.1:8000 while writing
    nox -s lint                 the pre-commit hooks (ruff, codespell, zizmor, ...) and mypy

`nox` alone runs the sessions marked default: tests, then docs. `nox -l` lists them all; the
file is also a script (`./noxfile.py -s lint`, or `uv run noxfile.py -s lint`).

Environments are reused between runs; the install step is skipped while pyproject.toml and the
session's requirements are unchanged. With uv installed (`pip install "nox[uv]"`), nox creates
them with uv, which is much faster; plain pip works too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True

ROOT = Path(__file__).resolve().parent
PYPROJECT = nox.project.load_toml(ROOT / "pyproject.toml")
BUILD = ROOT / "_build"
HTML = BUILD / "html"
CUDA_EXTRA = PYPROJECT["project"]["optional-dependencies"]["cuda"]


def _group(name: str) -> list[str]:
    return list(nox.project.dependency_groups(PYPROJECT, name))


def install(session: nox.Session, *requirements: str, project: bool = True) -> None:
    """Install requirements (and this project, editable) unless the same set is already there.

    A stamp in the environment records what was installed; the next run with the same
    pyproject.toml and requirements skips the installer altogether, which keeps a rebuild fast.
    """
    key = hashlib.sha256(
        json.dumps([sorted(requirements), project, (ROOT / "pyproject.toml").read_text()]).encode()
    ).hexdigest()
    stamp = Path(session.virtualenv.location) / ".remat-guide-installed"
    if stamp.is_file() and stamp.read_text() == key:
        session.log("requirements unchanged since the last run: nothing to install")
        return
    stamp.unlink(missing_ok=True)
    if requirements:
        session.install(*requirements)
    if project:
        session.install("-e", ".")
    stamp.write_text(key)


def visible_gpus() -> list[str]:
    """The NVIDIA GPUs `nvidia-smi -L` lists; empty where there is none or no driver."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")]


def run_pytest(session: nox.Session, backend: str | None, python: str = "python") -> None:
    env = {"REMAT_GUIDE_EXPECT_BACKEND": backend} if backend else {}
    if backend == "gpu":
        env["JAX_PLATFORMS"] = "cuda"  # fail loudly instead of falling back to the CPU
    args = session.posargs or ["-m", "not browser"]
    session.run(python, "-m", "pytest", *args, env=env)


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """pytest against CUDA jaxlib where a GPU is visible, else against CPU jaxlib."""
    flavour = "tests-cuda" if visible_gpus() else "tests-cpu"
    session.log(
        f"running {flavour} ({'a GPU is' if flavour == 'tests-cuda' else 'no GPU is'} "
        "visible to nvidia-smi)"
    )
    session.notify(flavour, posargs=session.posargs)


@nox.session(name="tests-cpu", default=False)
def tests_cpu(session: nox.Session) -> None:
    """pytest against CPU jaxlib."""
    install(session, *_group("test"))
    run_pytest(session, "cpu")


@nox.session(name="tests-cuda", default=False)
def tests_cuda(session: nox.Session) -> None:
    """pytest against JAX's CUDA wheels; stops before installing anything when no GPU is visible."""
    gpus = visible_gpus()
    if not gpus:
        session.error(
            "tests-cuda needs an NVIDIA GPU, and `nvidia-smi -L` lists none on this machine "
            "(no driver, or no device visible). Run `nox -s tests-cpu` here instead"
        )
    session.log("GPUs: " + "; ".join(gpus))
    install(session, *_group("test"), *CUDA_EXTRA)
    run_pytest(session, "gpu")


@nox.session(name="tests-installed", venv_backend="none", default=False)
def tests_installed(session: nox.Session) -> None:
    """pytest in the current environment, installing nothing (a GPU box without network, say)."""
    import importlib.util

    missing = [
        module
        for module in ("jax", "flax", "pytest", "matplotlib")
        if importlib.util.find_spec(module) is None
    ]
    if missing:
        session.error(
            "tests-installed runs in the current Python environment, which lacks "
            + ", ".join(missing)
            + ". Install them, or use `nox -s tests` where packages can be downloaded"
        )
    backend = os.environ.get("REMAT_GUIDE_EXPECT_BACKEND")
    if backend is None and visible_gpus():
        backend = "gpu"  # a visible GPU that JAX does not use is an error, not a CPU run
    run_pytest(session, backend, python=sys.executable)


def _sphinx_paths(session: nox.Session) -> list[str]:
    """Configuration, doctree cache, source and output folders, then the session's arguments."""
    return [
        *("-c", str(ROOT), "-d", str(BUILD / ".doctrees")),
        *(str(ROOT / "docs"), str(HTML)),
        *session.posargs,
    ]


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into _build/html, executing every cell; warnings are errors.

    The build also makes the project's wheel (hatchling) and serves it at
    _static/wheels/NAME-VERSION-py3-none-any.whl; each page's notebook installs it. Extra
    arguments go to sphinx-build (e.g. `nox -s docs -- -E` to re-read every page).
    """
    install(session, *_group("docs"))
    session.run("sphinx-build", "-b", "html", "-W", "--keep-going", "-n", *_sphinx_paths(session))
    session.log(f"open {HTML / 'index.html'}")


@nox.session(default=False)
def serve(session: nox.Session) -> None:
    """Rebuild and reload in the browser while writing: http://127.0.0.1:8000."""
    install(session, *_group("serve"))
    session.run(
        "sphinx-autobuild",
        *("--host", "127.0.0.1", "--port", "8000"),
        *("--watch", str(ROOT / "src" / "examples"), "--watch", str(ROOT / "conf.py")),
        *_sphinx_paths(session),
    )


@nox.session(default=False)
def browser(session: nox.Session) -> None:
    """Drive the built site in Chromium: console errors, accessibility, search, buttons."""
    if not (HTML / "index.html").is_file():
        session.error(f"no built site at {HTML}; run `nox -s docs` first")
    install(session, *_group("browser"), project=False)
    # Only the browser tests' file: the others import JAX, which this environment does not have.
    tests = str(ROOT / "tests" / "test_browser.py")
    session.run("python", "-m", "pytest", tests, "-m", "browser", *session.posargs)


#: What a reader's environment has in the notebooks session: the package's own dependencies
#: (JAX, Flax, NumPy), matplotlib for the figures, pip for the setup cell's `%pip install`, and
#: the notebook runner. Not the package itself: the first notebook's setup cell installs it.
NOTEBOOK_RUNTIME = [
    *PYPROJECT["project"]["dependencies"],
    *(r for r in _group("docs") if r.startswith("matplotlib")),
    "pip",
    "nbclient>=0.10",
    "ipykernel>=6.29",
]


@nox.session(default=False)
def notebooks(session: nox.Session) -> None:
    """Run every notebook of the built site outside the repository, installing from its wheel.

    Takes _build/html/_sources/**/*.ipynb and the wheel under _build/html/_static/wheels/ (run
    `nox -s docs` first) and executes each notebook alone in a temporary folder, in an
    environment with JAX, Flax, matplotlib and the runner only. REMAT_GUIDE_WHEEL points the
    setup cells at the wheel file: the first notebook installs the package from it, the others
    find it installed. `-- --only 'tutorial/*'` runs some pages only (docs/_tools/run_notebooks.py).
    """
    if not (HTML / "_sources").is_dir():
        session.error(f"no built site at {HTML}; run `nox -s docs` first")
    install(session, *NOTEBOOK_RUNTIME, project=False)
    # A clean start: what an earlier run's setup cell installed goes, so that this run's first
    # notebook installs the package again, from this build's wheel.
    session.run(
        "python", "-m", "pip", "uninstall", "--yes", "--quiet", PYPROJECT["project"]["name"]
    )
    runner = ROOT / "docs" / "_tools" / "run_notebooks.py"
    session.run("python", str(runner), str(HTML), *session.posargs)


def npm_ci(session: nox.Session) -> Path:
    """Install the npm packages of package-lock.json into node_modules, unless already there.

    Like :func:`install`, a stamp records the lock file it installed; `npm ci` runs only when the
    lock file changed (or node_modules is missing). Returns node_modules/.bin. (package.json pins
    third-party-web under `overrides`: a Lighthouse dependency asks for its `latest` tag, which
    would take the lock file out of step with each release.)
    """
    if shutil.which("npm") is None or shutil.which("node") is None:
        session.error(
            "this session needs Node.js and npm (the machine's, or Debian's: "
            "`apt-get install nodejs npm`)"
        )
    lock = ROOT / "package-lock.json"
    key = hashlib.sha256(lock.read_bytes()).hexdigest()
    stamp = ROOT / "node_modules" / ".remat-guide-installed"
    if stamp.is_file() and stamp.read_text() == key:
        session.log("package-lock.json unchanged since the last run: nothing to install")
    else:
        session.run("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", external=True)
        stamp.write_text(key)
    return ROOT / "node_modules" / ".bin"


@nox.session(default=False, venv_backend="none")
def lighthouse(session: nox.Session) -> None:
    """Lighthouse (mobile, simulated throttling) on every page; fails under the budget.

    Serves _build/html gzip-compressed on loopback under its hosted path and audits one page at
    a time with npm's Lighthouse (pinned in package-lock.json) in Debian's Chromium. Budget:
    performance at least 0.9 on every page (a page near it is run three times, the median
    counts), accessibility, best practices and SEO 1.0 (the 404 page's noindex aside), at most
    1 MB transferred. Writes _build/lighthouse/report.md. Pages to audit, or `--help`, after `--`.
    The script is standard library only, so the session needs no environment of its own.
    """
    if not (HTML / "index.html").is_file():
        session.error(f"no built site at {HTML}; run `nox -s docs` first")
    npm_ci(session)
    session.run(sys.executable, str(ROOT / "tests" / "lighthouse.py"), *session.posargs)


@nox.session(default=False)
def check(session: nox.Session) -> None:
    """Check a solution: `nox -s check -- PROBLEM FILE` (no arguments lists the problems)."""
    install(session)
    session.run("python", "-m", "examples.check", *session.posargs)


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """The pre-commit hooks over every tracked file, then mypy over src/examples.

    The hooks (.pre-commit-config.yaml) install their own environments from PyPI on first use.
    The fixers among them (ruff, end of file, trailing whitespace) rewrite the files they flag and
    fail the run; run again to see what is left. mypy reads the project's dependencies (JAX,
    Flax, NumPy), hence the project's install here (its settings: [tool.mypy] in pyproject.toml).
    """
    install(session, *_group("lint"))
    session.run("pre-commit", "run", "--all-files", "--show-diff-on-failure")
    session.run("mypy")


# --- Host offload recorded on a GPU (docs/howto/sharded-step.md) ---------------------------------


@nox.session(name="offload-record", venv_backend="none", default=False)
def offload_record(session: nox.Session) -> None:
    """Record host offload on this machine's GPU: `nox -s offload-record -- --out FILE.json`.

    Runs `python -m examples.howto.offload` in the current environment, installing nothing (a GPU
    box without network has JAX and its CUDA plugin already), with JAX held to the GPU. The file
    goes under src/examples/data/offload/, is never overwritten, and the how-to page renders it.
    """
    gpus = visible_gpus()
    if not gpus:
        session.error("offload-record needs an NVIDIA GPU, and `nvidia-smi -L` lists none here")
    if "--out" not in session.posargs:
        session.error(
            "name the file to write: "
            "nox -s offload-record -- --out src/examples/data/offload/MY-GPU.json"
        )
    session.log("GPUs: " + "; ".join(gpus))
    session.run(
        sys.executable,
        *("-m", "examples.howto.offload", *session.posargs),
        env={"PYTHONPATH": str(ROOT / "src"), "JAX_PLATFORMS": "cuda"},
    )


if __name__ == "__main__":
    nox.main()
