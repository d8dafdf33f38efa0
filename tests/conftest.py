"""Shared fixtures, and the guard that keeps a GPU run from silently testing on the CPU.

JAX is imported only where it is needed, so that the browser tests (`nox -s browser`, whose
environment has Playwright and no JAX) can run with this file in place.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from builtsite import ROOT


def pytest_sessionstart(session: pytest.Session) -> None:
    _float32_products_in_float32()
    expected = os.environ.get("REMAT_GUIDE_EXPECT_BACKEND")
    if not expected:
        return
    import jax

    if jax.default_backend() != expected:
        pytest.exit(
            f"this run was asked to test on the {expected} backend "
            f"(REMAT_GUIDE_EXPECT_BACKEND={expected}), but JAX's default backend is "
            f"{jax.default_backend()!r} with devices {jax.devices()}; refusing to test on the "
            "wrong hardware",
            returncode=3,
        )


def _float32_products_in_float32() -> None:
    """On a GPU, ask JAX for float32 matrix products computed in float32.

    JAX's default precision there lets XLA use TF32 (a 10-bit mantissa) for float32 products on
    Ampere and newer GPUs; the tests compare float32 results with float64 references at
    float32's tolerances, and on an H200 the default failed them (a loss 4e-5 off, relative).
    Child processes inherit the setting through the environment. A CPU computes float32
    products in float32 whatever the setting, and is left alone, so that the tests compile the
    programs the site compiles (and JAX's compilation cache serves both).
    """
    try:
        import jax
    except ImportError:  # the browser session's environment has no JAX
        return
    if jax.default_backend() != "gpu":
        return
    os.environ["JAX_DEFAULT_MATMUL_PRECISION"] = "highest"
    jax.config.update("jax_default_matmul_precision", "highest")


def pytest_report_header(config: pytest.Config) -> list[str]:
    try:
        from examples.tools.runinfo import collect
    except ImportError as error:  # the browser session's environment has no JAX
        return [f"remat guide: JAX not importable here ({error})"]
    return [f"remat guide: {collect().one_line()}"]


#: Test files that share a session-scoped fixture of their folder's conftest.py (an expensive
#: measurement several files read): pytest-xdist sends each group to one worker, as `--dist
#: loadfile` does with one file, so the fixture is computed once. Every other file is its own group.
XDIST_GROUPS: dict[str, tuple[str, ...]] = {
    # the explorer's measurements of every policy (tests/explorer/conftest.py: results, depth)
    "explorer results": (
        "tests/explorer/test_model.py",
        "tests/explorer/test_run.py",
        "tests/explorer/test_data.py",
        "tests/explorer/test_render.py",
    ),
    # the release facts measured on the installed JAX (tests/reference/conftest.py: facts, record)
    "release facts": (
        "tests/reference/test_release_facts.py",
        "tests/reference/test_releases.py",
        "tests/reference/test_release_table.py",
        "tests/reference/test_release_runs.py",
    ),
}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent from the browser's environment
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile`, with the files of :data:`XDIST_GROUPS` kept together (test ids as they
    are: xdist's `loadgroup` would append the group's name to every test id)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    group_of = {file: name for name, files in XDIST_GROUPS.items() for file in files}

    class FileGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return group_of.get(file, file)

    return FileGroupScheduling(config, log)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--all",
        action="store_true",
        default=False,
        help="run the tests marked slow too (the quick run leaves them out; CI runs them all)",
    )


#: How many tests the quick run left out (for the summary).
_LEFT_OUT = pytest.StashKey[int]()
#: What the quick run leaves out, and how to run it: printed at the end of a quick run.
QUICK_RUN_NOTE = (
    "{n} test{s} marked slow were left out (whole-site builds, child processes, fresh "
    "environments, eight-device programs, and the guides' full measurements and every model "
    "family): "
    "`nox -s tests -- --all` (or `pytest --all`) runs them too, as CI does"
)


def quick_run(config: pytest.Config) -> bool:
    """Whether this run leaves the tests marked ``slow`` out: yes, unless ``--all`` is given,
    the ``-m`` expression names ``slow`` itself, or a test is named by its id (``file::test``)."""
    if config.getoption("--all") or "slow" in (config.getoption("-m") or ""):
        return False
    return not any("::" in str(arg) for arg in config.args)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if quick_run(config):
        slow = [item for item in items if "slow" in item.keywords]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if "slow" not in item.keywords]
            config.stash[_LEFT_OUT] = len(slow)
    marked = {m for m in ("gpu", "cpu_figures") if any(m in item.keywords for item in items)}
    if not marked:
        return
    import jax

    backend = jax.default_backend()
    skips = {
        "gpu": backend != "gpu"
        and pytest.mark.skip(reason=f"needs a CUDA GPU; JAX's default backend here is {backend!r}"),
        "cpu_figures": backend != "cpu"
        and pytest.mark.skip(
            reason=f"checks what XLA:CPU compiles; JAX's default backend here is {backend!r}"
        ),
    }
    for item in items:
        for name in marked:
            if skips[name] and name in item.keywords:
                item.add_marker(skips[name])


# --- Building a site with the project's conf.py ---------------------------------------------------

#: Any download a build attempts (an inventory, a font, a social card) goes to a closed port and
#: fails; with -W the warning fails the build: a build must not need the network.
OFFLINE = {
    key: "http://127.0.0.1:9" for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
} | {"NO_PROXY": "", "no_proxy": ""}


def run_sphinx(
    source: Path, out: Path, *, env: dict[str, str], strict: bool = True
) -> subprocess.CompletedProcess:
    """`sphinx-build` of `source` into `out` with the project's conf.py, nitpicky and offline.

    `strict` makes warnings errors, as `nox -s docs` does. The caller's REMAT_GUIDE_* variables
    are dropped and `env` is added (REMAT_GUIDE_BUILD_DIR, at least, so that the execution cache
    is the test's own); doctrees go beside `out`.
    """
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("REMAT_GUIDE_")}
    full_env |= OFFLINE | env
    return subprocess.run(
        [
            *(sys.executable, "-m", "sphinx", "-b", "html", "-n", "-q"),
            *(("-W", "--keep-going") if strict else ()),
            *("-c", str(ROOT), "-d", str(out.parent / "doctrees"), str(source), str(out)),
        ],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=600,
        check=False,
    )


@pytest.fixture
def sphinx_build():
    """:func:`run_sphinx`, for tests that build a site (needs the docs dependency group)."""
    pytest.importorskip("myst_nb", reason="needs the docs dependency group")
    return run_sphinx


@pytest.fixture(params=[False, True], ids=["remat2", "remat3"])
def remat3(request: pytest.FixtureRequest):
    """Run a test under JAX's default remat (``False``) and under ``jax_remat3`` (``True``; skipped,
    with its reason, on a JAX without the flag), the flag switched for the test's duration."""
    # Not parametrized with tests/remat_modes.REMAT_MODES: building that list imports JAX, and this
    # file must import without JAX (the browser session's environment has none).
    from examples.tools import jaxprs

    if not jaxprs.remat3_available():
        if request.param:
            pytest.skip("this JAX has no jax_remat3 flag")
        yield False
        return
    with jaxprs.remat3(request.param):
        yield request.param


# --- Where the time goes ------------------------------------------------------------------------

#: Seconds spent per test file (setup, call and teardown of its tests, module fixtures included),
#: summed on the controller from every worker's reports.
_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    file = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[file] = _FILE_SECONDS.get(file, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The slowest test files, after pytest's own ``--durations`` list of the slowest tests.

    Summed per file, so the figures add up to the workers' busy time (about the wall time times
    the number of workers): what a change must cut to make the suite faster.
    """
    # Under pytest-xdist the workers collect and deselect, so the count is known only in a
    # serial run; the note is printed either way.
    if quick_run(config) and not config.getoption("collectonly", False):
        left_out = config.stash.get(_LEFT_OUT, 0)
        terminalreporter.write_line(
            QUICK_RUN_NOTE.format(n=left_out or "the", s="s" if left_out != 1 else "")
        )
    if not _FILE_SECONDS or config.getoption("collectonly", False):
        return
    shown = int(os.environ.get("REMAT_GUIDE_SLOWEST_FILES", "12"))
    if shown <= 0:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.section(f"slowest {shown} test files (of {total:.0f} s of test time)")
    for file, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:shown]:
        terminalreporter.write_line(f"{seconds:8.1f} s  {100 * seconds / total:4.1f} %  {file}")
