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
    nox -s plans                compile for GPUs and TPUs without one (libtpu, CUDA plugin): the
                                tests marked `plans`, or `nox -s plans -- COMMAND` to record
    nox -s tests-jax            the examples' tests on every JAX release of the matrix, recording
                                what each release does (docs/reference/releases.md)
    nox -t jax-oldest           ... on the oldest release only (-t jax-newest: the newest)
    nox -s lock                 rewrite locks/ after a dependency or a matrix release changes
    nox -s offload-record -- --out FILE.json
                                on an NVIDIA GPU: record host offload for the sharded-step guide

`nox` alone runs the sessions marked default: tests, then docs. `nox -l` lists them all; the
file is also a script (`./noxfile.py -s lint`, or `uv run noxfile.py -s lint`).

Environments are reused between runs; the install step is skipped while pyproject.toml and the
session's requirements are unchanged. How the sessions are kept fast (pytest-xdist, the quick
run, JAX's compilation cache, cheaper machine code in the tests, bytecode under _build/pycache)
is in CONTRIBUTING.md, "How the sessions are kept fast". With uv installed
(`pip install "nox[uv]"`), nox creates them with uv, which is much faster; plain pip works too.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
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


#: The lock: one requirements file per session kind under locks/, each made by `nox -s lock` with
#: uv's universal resolution (one file serves Python 3.11, 3.12 and 3.13: markers pick jax 0.10.2
#: on 3.11 and the newest JAX on 3.12 and later) and with every distribution's hashes. Each entry:
#: the lock's name -> (the dependency groups it holds, the extras, whether the project's own
#: dependencies are in it). The project itself is installed without dependencies on top.
LOCKS = ROOT / "locks"
LOCKED: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]] = {
    "test": (("test",), (), True),
    "cuda": (("test",), ("cuda",), True),
    "plans": (("test",), ("plans",), True),
    "docs": (("docs",), (), True),
    "serve": (("serve",), (), True),
    "lint": (("lint",), (), True),
    "notebooks": (("notebooks",), (), True),
    "browser": (("browser",), (), False),
}
#: The oldest Python the lock resolves for (pyproject.toml's requires-python).
LOCK_PYTHON = "3.11"
#: The site is built on the newest JAX, which needs this Python or newer.
SITE_PYTHON_MIN = (3, 12)


def _group(name: str) -> list[str]:
    return list(nox.project.dependency_groups(PYPROJECT, name))


def lock_file(name: str) -> Path:
    return LOCKS / f"{name}.txt"


def install(session: nox.Session, lock: str, *, project: bool = True) -> None:
    """Install the exact versions of ``locks/LOCK.txt`` (and this project, editable, without its
    dependencies), unless the same lock is installed already.

    A stamp in the environment records what was installed; the next run with the same lock and
    pyproject.toml skips the installer altogether, which keeps a rebuild fast.
    """
    path = lock_file(lock)
    if not path.is_file():
        session.error(f"no lock file {path.relative_to(ROOT)}: run `nox -s lock` to make it")
    key = hashlib.sha256(
        json.dumps([path.read_text(), project, (ROOT / "pyproject.toml").read_text()]).encode()
    ).hexdigest()
    stamp = Path(session.virtualenv.location) / ".remat-guide-installed"
    if stamp.is_file() and stamp.read_text() == key:
        session.log(f"{path.name} unchanged since the last run: nothing to install")
        return
    stamp.unlink(missing_ok=True)
    # Every line of a lock carries hashes, so pip and uv install in hash-checking mode: exactly
    # what CI installed, whatever the index holds that day.
    session.install("-r", str(path))
    if project:
        session.install("--no-deps", "-e", ".")
    stamp.write_text(key)


def site_python() -> str | None:
    """The Python the site is built with: this interpreter if it is 3.12 or newer, else the
    newest python3.13 / python3.12 on PATH; None where there is none."""
    if sys.version_info >= SITE_PYTHON_MIN:
        return f"{sys.version_info.major}.{sys.version_info.minor}"
    for version in ("3.13", "3.12"):
        exe = shutil.which(f"python{version}")
        # A pyenv shim is on PATH whether or not its version is selected: ask it to run.
        if (
            exe
            and subprocess.run([exe, "-c", ""], capture_output=True, check=False).returncode == 0
        ):
            return version
    return None


SITE_PYTHON = site_python()
NO_SITE_PYTHON = (
    "the site is built on the newest JAX (the lock's, for Python 3.12 and newer), which needs "
    f"Python 3.12 or newer: this is Python {sys.version_info.major}.{sys.version_info.minor} and "
    "neither python3.12 nor python3.13 is on PATH. Install Python 3.12 (under pyenv: "
    "PYENV_VERSION=3.11.7:3.12.1) and run again"
)


def require_site_python(session: nox.Session) -> None:
    if SITE_PYTHON is None:
        session.error(NO_SITE_PYTHON)


#: JAX's persistent compilation cache, shared by the tests, the site build and the notebooks run
#: of one clone (never committed: it lives under _build/). JAX keys each entry by the program,
#: the compile options, the backend and the jax and jaxlib versions, so another release or another
#: program misses it (tests/test_compilation_cache.py shows a changed input missing).
#: REMAT_GUIDE_JAX_CACHE=off turns it off; another path moves it.
def jax_cache_env() -> dict[str, str]:
    where = os.environ.get("REMAT_GUIDE_JAX_CACHE", str(BUILD / "jax-cache"))
    if where == "off":
        return {}
    return {
        "JAX_COMPILATION_CACHE_DIR": where,
        # Every program, however quick to compile: the pages and tests compile thousands of small
        # ones, and the default (programs that took a second or more) would keep almost none.
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
    }


#: Where the sessions' Python processes keep the bytecode they compile (PYTHONPYCACHEPREFIX).
PYCACHE = BUILD / "pycache"


def bytecode_env() -> dict[str, str]:
    """Let each session's Python processes keep the bytecode of what they import, under
    :data:`PYCACHE`, and read it back.

    uv installs packages without compiling their bytecode (pip compiles it at install time), and
    where PYTHONDONTWRITEBYTECODE is set, as on this project's machines, every process then
    compiles every module it imports from source: JAX, Flax and Optax about 1.7 CPU-seconds more
    per process (2.8 against 1.2), paid again by each test worker, each child process of the
    tests, each page's kernel of the site build and each notebook. With this, the first process
    to import a module writes its bytecode and the others read it (five processes one after the
    other importing those three: 16.5 CPU-seconds against 8.5). It is written under _build/, not
    next to the sources or in the environments; Python checks each file against its source's
    size and time. REMAT_GUIDE_PYCACHE=off leaves Python's own settings."""
    if os.environ.get("REMAT_GUIDE_PYCACHE") == "off":
        return {}
    # An empty PYTHONDONTWRITEBYTECODE is as good as unset for Python.
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(PYCACHE)}


#: LLVM's optimisation off for the tests' CPU programs. XLA's own passes (remat, fusion,
#: scheduling, buffer assignment: what memory_analysis, cost_analysis and the gradients come from)
#: run as before; only the machine code is compiled with less effort, and so runs slower. The
#: tests compile thousands of programs and run each a few times: on choose-policy's programs,
#: XLA's compile took 4.0 s instead of 6.6 s, with the same memory_analysis (CONTRIBUTING.md).
#: The site build and the notebooks keep the default, since their pages time programs; there
#: the programs compiled only to be read (examples.tools.measure.compiled_stats and
#: compile_for_analysis) ask for level 0 themselves.
#: tests/test_codegen.py checks that both levels plan the same. REMAT_GUIDE_CODEGEN=full keeps
#: the default for the tests too.
CHEAP_CODEGEN = "--xla_backend_optimization_level=0"


def cheap_codegen_env() -> dict[str, str]:
    if os.environ.get("REMAT_GUIDE_CODEGEN") == "full":
        return {}
    return {"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {CHEAP_CODEGEN}".strip()}


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
        # CUDA first, so that it is the default and a GPU JAX cannot use fails loudly instead of
        # falling back to the CPU; the CPU too, which host callbacks and the plans' CPU target need.
        env["JAX_PLATFORMS"] = "cuda,cpu"
    else:
        env |= jax_cache_env() | cheap_codegen_env()
    # The quick run (tests marked slow left out, see tests/conftest.py); `-- --all` runs them
    # too. Arguments after `--` are added to these (a later `-m` replaces the first). pytest
    # prints the slowest tests and, from tests/conftest.py, the slowest files.
    args = ["-m", "not browser", *xdist_args(), "--durations=15", *session.posargs]
    session.run(python, "-m", "pytest", *args, env=env | bytecode_env())


def xdist_args() -> list[str]:
    """pytest-xdist's workers: one per core (REMAT_GUIDE_TEST_WORKERS overrides; 0 runs serially).

    `--dist loadfile` keeps a test file's tests in one worker, so module-scoped fixtures (the
    expensive measurements a file shares) are computed once, as in a serial run.
    """
    workers = os.environ.get("REMAT_GUIDE_TEST_WORKERS", str(os.cpu_count() or 1))
    if workers in {"0", "1"}:
        return []
    return ["-n", workers, "--dist", "loadfile"]


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
    install(session, "test")
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
    install(session, "cuda")
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


@nox.session(python=SITE_PYTHON or False)
def docs(session: nox.Session) -> None:
    """Build the site into _build/html, executing every cell; warnings are errors.

    The build also makes the project's wheel (hatchling) and serves it at
    _static/wheels/NAME-VERSION-py3-none-any.whl; each page's notebook installs it. Extra
    arguments go to sphinx-build (e.g. `nox -s docs -- -E` to re-read every page).
    """
    require_site_python(session)
    install(session, "docs")
    session.run(
        *("sphinx-build", "-b", "html", "-W", "--keep-going", "-n", *_sphinx_paths(session)),
        env=jax_cache_env() | bytecode_env(),
    )
    session.log(f"open {HTML / 'index.html'}")


@nox.session(python=SITE_PYTHON or False, default=False)
def serve(session: nox.Session) -> None:
    """Rebuild and reload in the browser while writing: http://127.0.0.1:8000."""
    require_site_python(session)
    install(session, "serve")
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
    install(session, "browser", project=False)
    # Only the browser tests' file: the others import JAX, which this environment does not have.
    tests = str(ROOT / "tests" / "test_browser.py")
    session.run(
        "python", "-m", "pytest", tests, "-m", "browser", *session.posargs, env=bytecode_env()
    )


@nox.session(python=SITE_PYTHON or False, default=False)
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
    require_site_python(session)
    # What a reader's environment has: the package's dependencies (JAX, Flax, NumPy), matplotlib
    # for the figures, pip for the setup cell's `%pip install`, and the notebook runner (the
    # `notebooks` dependency group). Not the package itself: the first setup cell installs it.
    install(session, "notebooks", project=False)
    # A clean start: what an earlier run's setup cell installed goes, so that this run's first
    # notebook installs the package again, from this build's wheel.
    session.run(
        "python", "-m", "pip", "uninstall", "--yes", "--quiet", PYPROJECT["project"]["name"]
    )
    runner = ROOT / "docs" / "_tools" / "run_notebooks.py"
    session.run(
        "python",
        str(runner),
        str(HTML),
        *session.posargs,
        env=jax_cache_env() | bytecode_env(),
    )


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
    install(session, "notebooks")  # JAX, Flax and matplotlib: what a learner's environment has
    session.run("python", "-m", "examples.check", *session.posargs)


@nox.session(python=SITE_PYTHON or False, default=False)
def lint(session: nox.Session) -> None:
    """The pre-commit hooks over every tracked file, then mypy over src/examples.

    The hooks (.pre-commit-config.yaml) install their own environments from PyPI on first use.
    The fixers among them (ruff, end of file, trailing whitespace) rewrite the files they flag and
    fail the run; run again to see what is left. mypy reads the project's dependencies (JAX,
    Flax, NumPy), hence the project's install here (its settings: [tool.mypy] in pyproject.toml).
    """
    require_site_python(session)
    install(session, "lint")
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


# --- Plans compiled for GPUs and TPUs without one (issue 35; examples.tools.targets) --------------


@nox.session(python=SITE_PYTHON or False, default=False)
def plans(session: nox.Session) -> None:
    """Compile for GPU and TPU targets on this machine: `nox -s plans [-- COMMAND ...]`.

    Installs the test environment plus XLA's TPU compiler (libtpu) and JAX's CUDA 13 plugin
    (locks/plans.txt; Linux x86_64 only; 4.7 GB more than the test environment), then runs
    the tests marked `plans` (every target compiles the reference step, the policies' order, a
    fresh compile against the committed record), or COMMAND in that environment, e.g.
    `nox -s plans -- python -m examples.tools.plan_records record FILE.json`. The docs environment
    has neither compiler: the pages render the records under src/examples/data/plans/.
    No accelerator is needed; JAX's default backend stays on the CPU.
    """
    require_site_python(session)
    if sys.platform != "linux" or platform.machine() != "x86_64":
        session.error("libtpu and JAX's CUDA plugin exist for Linux x86_64 only")
    install(session, "plans")
    # No persistent compilation cache: these compiles are the measurement.
    env = {"JAX_PLATFORMS": "cpu", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    if session.posargs:
        session.run(*session.posargs, env=env)
    else:
        session.run("python", "-m", "pytest", "-m", "plans", "-p", "no:xdist", "tests", env=env)


# ------------------------------------------------------------------------------------------------
# The JAX release matrix (issue 16): the examples' tests on every recent JAX release, and the
# facts of docs/reference/releases.md ("Across JAX releases"), measured on each.
#
#     nox -s tests-jax                     every release below (nine environments)
#     nox -s "tests-jax(0.5.3)"            one release, by its id
#     nox -t jax-oldest jax-py311          the oldest and Python 3.11's newest (what CI runs;
#                                          CI tests the newest release through `nox -s tests`)
#     nox -t jax-oldest -- --quick         the quick run only (tests marked slow left out), no
#                                          record written: a quicker look while working
#
# Every test passes on every release: where releases behave differently, a test expects each
# release's own answer, and a feature a release lacks is skipped with that reason. A failure
# fails the session (after its record is written, with the failure and its reason, so that the
# releases page and `git diff` show what broke); there are no known failures.
#
# Each environment has that JAX (its jaxlib comes with it), the Flax that goes with it (below),
# pytest, matplotlib and numpy: not the documentation stack. After the tests, the
# session runs `python -m examples.reference.releases`, which measures the facts and writes
# src/examples/data/releases/jax-RELEASE.json with the tests' outcome. It replaces the record of
# the release it ran, on purpose (a release's record is its latest run), and says so.
# Python 3.12 must be on PATH for the last releases (pyenv: PYENV_VERSION=3.11.7:3.12.1).
# ------------------------------------------------------------------------------------------------

#: (Python, jax, flax, tags), oldest first: the package's lower bound (pyproject.toml), then the
#: newest patch of every minor release. Python 3.11 gets JAX 0.10 at most; 3.12 the rest.
#: Flax is the newest release whose requirements accept that JAX and that runs on it: flax
#: 0.10.4 accepts jax 0.5.0 but its linen transforms call `jax.api_util.debug_info`, new in jax
#: 0.5.1, so jax 0.5.0 gets 0.10.3, the last Flax released before jax 0.5.1. Flax 0.10.5 needs
#: jax>=0.5.1, 0.10.7 needs jax>=0.6.0, 0.12.0 needs jax>=0.7.1, 0.12.1 needs jax>=0.8.1,
#: 0.12.7 needs jax>=0.10.0, and 0.12.9 needs Python 3.12.
JAX_RELEASES: list[tuple[str, str, str, list[str]]] = [
    ("3.11", "0.5.0", "0.10.3", ["jax-oldest"]),
    ("3.11", "0.5.3", "0.10.6", []),
    ("3.11", "0.6.2", "0.11.2", []),
    ("3.11", "0.7.2", "0.12.0", []),
    ("3.11", "0.8.3", "0.12.6", []),
    ("3.11", "0.9.2", "0.12.6", []),
    ("3.11", "0.10.2", "0.12.8", ["jax-py311"]),
    ("3.12", "0.11.2", "0.12.12", []),
    ("3.12", "0.12.0.1", "0.12.12", ["jax-newest"]),
]
#: Left out of the matrix: the files that build sites or the site's wheel and notebooks, or read
#: the pages as the site runs them (they need the documentation stack, which the matrix does not
#: install, not a particular JAX: the site is built on the newest), and the
#: checks of the release records as a whole (the matrix is rewriting them). Every other file under
#: tests/ runs, so a new example's tests join the matrix by themselves.
JAX_MATRIX_EXCLUDED_FILES = (
    "test_site.py",
    "test_pages.py",
    "test_browser.py",
    "test_search.py",
    "test_takehome.py",
    "test_lighthouse.py",
    "test_copyable.py",
    "reference/test_release_data.py",
    "test_lock.py",
)
JAX_MATRIX_DATA = ROOT / "src" / "examples" / "data" / "releases"


def matrix_records_dir() -> Path:
    """Where the matrix writes each release's record: the package's data, to be committed, unless
    REMAT_GUIDE_RELEASES_OUT names another folder. CI names a temporary one: its matrix lane runs
    while the site lane builds the wheel and the pages from the package's data, and a record
    rewritten between the two builds of tests/test_site.py's reproducibility test made their
    wheels differ. The committed record is copied there first, so the run still says what
    changed."""
    where = os.environ.get("REMAT_GUIDE_RELEASES_OUT")
    return Path(where).resolve() if where else JAX_MATRIX_DATA


@nox.session(name="tests-jax", default=False)
@nox.parametrize(
    ("python", "jax", "flax"),
    [nox.param(py, jax, flax, id=jax, tags=tags) for py, jax, flax, tags in JAX_RELEASES],
)
def tests_jax(session: nox.Session, jax: str, flax: str) -> None:
    """The examples' tests on one JAX release and its Flax; records the release's facts."""
    import time
    import xml.etree.ElementTree

    lock = f"matrix/jax-{jax}"
    start = time.perf_counter()
    install(session, lock)
    install_s = time.perf_counter() - start
    if session._runner.global_config.install_only:  # `nox --install-only`: environments only
        return

    tmp = Path(session.create_tmp())
    junit = tmp / "junit.xml"
    junit.unlink(missing_ok=True)
    ignores = [f"--ignore={ROOT / 'tests' / name}" for name in JAX_MATRIX_EXCLUDED_FILES]
    # Arguments after `--` replace the test selection (and then no record is written); `--quick`
    # alone runs the quick run's selection (the tests marked slow left out), as CI does.
    quick = session.posargs == ["--quick"]
    everything = [str(ROOT / "tests"), *ignores, "-m", "not browser", *xdist_args()]
    if not quick:
        everything.append("--all")
    selection = everything if quick else (session.posargs or everything)
    start = time.perf_counter()
    session.run(
        *("python", "-m", "pytest", *selection, "-p", "no:cacheprovider", f"--junitxml={junit}"),
        # A test file that fails to import on this release is recorded as that file's error; the
        # other files still run.
        "--continue-on-collection-errors",
        env={
            "REMAT_GUIDE_EXPECT_BACKEND": "cpu",
            "JAX_PLATFORMS": "cpu",
            **jax_cache_env(),
            **cheap_codegen_env(),
            **bytecode_env(),
        },
        success_codes=[0, 1],
    )
    tests_s = time.perf_counter() - start
    if not junit.is_file():
        session.error(f"pytest wrote no report on jax {jax}: see its output above")
    if session.posargs:
        session.log(
            "the quick run (tests marked slow left out): a partial run, so no facts are recorded"
            if quick
            else "pytest arguments given: a partial run, so no facts are recorded"
        )
        suites = list(xml.etree.ElementTree.parse(junit).getroot().iter("testsuite"))
        failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
        if failed:
            session.error(f"{failed} tests failed on jax {jax}: see pytest's output above")
        return
    out = matrix_records_dir()
    record = out / f"jax-{jax}.json"
    if out != JAX_MATRIX_DATA:
        out.mkdir(parents=True, exist_ok=True)
        committed = JAX_MATRIX_DATA / record.name
        if committed.is_file() and not record.exists():
            shutil.copy2(committed, record)
    session.log(
        f"recording jax {jax}: replacing {record} if it exists, on purpose (the record of a "
        "release is its latest run; git shows the old one)"
    )
    session.run(
        *(
            "python",
            "-m",
            "examples.reference.releases",
            "--out",
            str(out),
            "--replace",
        ),
        *("--junit", str(junit)),
        *("--seconds", f"install={install_s:.0f}", "--seconds", f"tests={tests_s:.0f}"),
    )
    failed = sorted(item["test"] for item in json.loads(record.read_text())["tests"]["failed"])
    if failed:
        session.error(
            f"{len(failed)} tests failed on jax {jax} (its new record says why each failed): "
            + ", ".join(failed)
        )


# --- The lock ------------------------------------------------------------------------------------

#: What each matrix environment holds besides its jax and flax (and the project's dependencies).
MATRIX_GROUP = "matrix"


@nox.session(default=False)
def lock(session: nox.Session) -> None:
    """Re-lock: rewrite every file under locks/ from pyproject.toml and the newest releases.

    Run it after changing a dependency in pyproject.toml or JAX_RELEASES, or to move the site to
    newer releases (then rebuild and test: the lock is what CI installs). Uses uv's universal
    resolution (`uv pip compile --universal`), one file per session kind for every supported
    Python, and one file per release of the matrix; every line carries its hashes.
    `-- test docs` re-locks some files only (their names under locks/, without .txt).
    """
    session.install("uv")
    wanted = set(session.posargs)
    common = [
        *("--universal", "--python-version", LOCK_PYTHON, "--generate-hashes", "--quiet"),
        *("--custom-compile-command", "nox -s lock"),
    ]
    for name, (groups, extras, with_project) in LOCKED.items():
        if wanted and name not in wanted:
            continue
        sources = ["pyproject.toml"] if with_project else []
        args = [*(f"--group={g}" for g in groups), *(f"--extra={e}" for e in extras)]
        session.run("uv", "pip", "compile", *sources, *args, *common, "-o", str(lock_file(name)))
    tmp = Path(session.create_tmp())
    for python, jax, flax, _ in JAX_RELEASES:
        name = f"matrix/jax-{jax}"
        if wanted and name not in wanted:
            continue
        pins = tmp / f"jax-{jax}.in"
        pins.write_text(f"jax=={jax}\nflax=={flax}\n")
        session.run(
            *("uv", "pip", "compile", "pyproject.toml", str(pins), f"--group={MATRIX_GROUP}"),
            *("--python-version", python, "--generate-hashes", "--quiet"),
            *("--custom-compile-command", "nox -s lock"),
            *("-o", str(lock_file(name))),
        )


if __name__ == "__main__":
    nox.main()
