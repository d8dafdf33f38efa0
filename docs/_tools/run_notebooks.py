"""Run the built site's notebooks outside the repository, as a reader would (`nox -s notebooks`).

    python docs/_tools/run_notebooks.py SITE [--only PATTERN ...] [--keep DIR] [--allow-installed]
                                             [--jobs N]

Takes every notebook the site offers (``SITE/_sources/**/*.ipynb``) and the wheel it serves
(``SITE/_static/wheels/*.whl``), copies each notebook alone into a folder of its own under a
temporary folder outside the repository, and executes it there in a fresh kernel of this Python
(nbclient and ipykernel), with ``REMAT_GUIDE_WHEEL`` set to the wheel file. Each notebook's setup
cell installs the package from that file where it is missing: the first notebook installs it, the
others find it installed, and the run checks that the installed package came from the wheel. A
cell tagged ``raises-exception`` may raise; any other error fails its notebook. One line per
notebook, with its time; the exit status is 1 if any notebook failed. ``--jobs N`` runs N
notebooks at a time (a kernel runs one cell at a time, on about one core), each in a process of
its own; the first notebook always runs alone, since its setup cell installs the package.

This script imports nothing of the repository (it runs in an environment that has only JAX, Flax,
matplotlib, pip and the notebook runner) and nothing of the package it tests.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fnmatch
import importlib.metadata
import importlib.util
import json
import multiprocessing
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "jax-remat-guide-examples"
#: The setup cell's variable that names the wheel to install (docs/_ext/take_home.py).
WHEEL_VARIABLE = "REMAT_GUIDE_WHEEL"
#: The id of the setup cell (docs/_ext/take_home.py).
SETUP_ID = "remat-guide-setup"
#: The kernelspec written for the run: this interpreter, whatever else Jupyter finds.
KERNEL = "remat-guide-notebooks"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class RunError(Exception):
    """The run cannot start; the message says why and what to do."""


@dataclasses.dataclass
class Result:
    name: str  #: the notebook's path under _sources/
    seconds: float
    error: str | None = None  #: None when every cell ran (or raised where tagged to)


def site_notebooks(site: Path, only: Sequence[str] = ()) -> list[str]:
    """The notebooks the site offers, as paths under ``_sources/`` (``tutorial/x.ipynb``), sorted.

    ``only`` keeps those whose page name (the path without ``.ipynb``) matches one of the
    fnmatch patterns.
    """
    sources = site / "_sources"
    if not sources.is_dir():
        raise RunError(f"no built site at {site} (no _sources/): run `nox -s docs` first")
    names = sorted(p.relative_to(sources).as_posix() for p in sources.rglob("*.ipynb"))
    if only:
        names = [n for n in names if any(fnmatch.fnmatch(n[: -len(".ipynb")], p) for p in only)]
    if not names:
        raise RunError(
            f"no notebook under {sources}"
            + (f" matches {', '.join(only)}" if only else ": build the site with `nox -s docs`")
        )
    return names


def site_wheel(site: Path) -> Path:
    """The one wheel the site serves."""
    wheels = sorted((site / "_static" / "wheels").glob("*.whl"))
    if len(wheels) != 1:
        raise RunError(
            f"the site at {site} serves {len(wheels)} wheels under _static/wheels/, not one: "
            "rebuild it with `nox -s docs`"
        )
    return wheels[0]


def check_setup_cell(notebook: dict[str, object], name: str) -> None:
    """Refuse a notebook whose first cell is not the setup cell (a site built before it)."""
    cells = notebook.get("cells")
    first = cells[0] if isinstance(cells, list) and cells else {}
    if not isinstance(first, dict) or first.get("id") != SETUP_ID:
        raise RunError(
            f"{name} does not start with the setup cell that installs the package: rebuild the "
            "site with `nox -s docs`"
        )


def stage(site: Path, names: Sequence[str], workdir: Path) -> list[Path]:
    """Copy each notebook alone into a folder of its own under ``workdir``; return their paths.

    A notebook finds nothing beside it: a page that reads a file next to its source, or one
    relative to the repository, fails here as it would for a reader.
    """
    staged = []
    for number, name in enumerate(names, 1):
        notebook = json.loads((site / "_sources" / name).read_text(encoding="utf-8"))
        check_setup_cell(notebook, name)
        folder = workdir / f"{number:02d}-{name[: -len('.ipynb')].replace('/', '-')}"
        folder.mkdir(parents=True)
        target = folder / Path(name).name
        shutil.copyfile(site / "_sources" / name, target)
        staged.append(target)
    return staged


def outside_repository(folder: Path, root: Path = ROOT) -> bool:
    return not folder.resolve().is_relative_to(root.resolve())


def write_kernelspec(jupyter_dir: Path) -> None:
    """A kernelspec named :data:`KERNEL` that starts ipykernel in this interpreter.

    Jupyter picks a kernel by name from several folders (the user's among them); a name of our
    own, in a folder put first on ``JUPYTER_PATH``, makes sure the notebooks run here.
    """
    spec = jupyter_dir / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    kernel = {"argv": argv, "display_name": "Python 3 (remat guide)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel, indent=1), encoding="utf-8")


def reader_environment(workdir: Path, wheel: Path) -> dict[str, str]:
    """The environment the kernels start in: this one, without the repository on the path."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "JUPYTER_PATH"}}
    env |= {
        WHEEL_VARIABLE: str(wheel.resolve()),
        "JUPYTER_PATH": str(workdir / "jupyter"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    return env


def error_summary(text: str, lines: int = 25) -> str:
    """The end of an error report from nbclient, without terminal colours."""
    clean = ANSI.sub("", text).strip().splitlines()
    return "\n".join(clean[-lines:])


def run_notebook(path: Path, timeout: int) -> Result:
    """Execute one notebook in its own folder, in place; an error fails it."""
    import nbclient
    import nbformat

    name = path.name
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name=KERNEL,
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as failure:
        error = error_summary(str(failure))
    except (nbclient.exceptions.CellTimeoutError, nbclient.exceptions.DeadKernelError) as failure:
        error = f"{type(failure).__name__}: {error_summary(str(failure))}"
    seconds = time.perf_counter() - start
    nbformat.write(notebook, path)
    return Result(name, seconds, error)


def installed_from(distribution: str = DISTRIBUTION) -> str | None:
    """Where pip installed ``distribution`` from (its direct_url.json), or None."""
    try:
        text = importlib.metadata.distribution(distribution).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    return json.loads(text).get("url") if text else None


def same_file(url: str | None, wheel: Path) -> bool:
    if not url or not url.startswith("file:"):
        return False
    path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    return path.resolve() == wheel.resolve()


def report(results: Sequence[Result], total: float) -> str:
    width = max(len(r.name) for r in results)
    lines = [
        f"{r.name:<{width}}  {r.seconds:7.1f} s  {'ok' if r.error is None else 'FAILED'}"
        for r in results
    ]
    failed = sum(r.error is not None for r in results)
    lines.append(
        f"{len(results)} notebooks in {total:.0f} s: {len(results) - failed} ran, {failed} failed"
    )
    return "\n".join(lines)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def run_all(names: Sequence[str], staged: Sequence[Path], timeout: int, jobs: int) -> list[Result]:
    """Run every notebook, the first alone and then ``jobs`` at a time; results in ``names``'
    order. Each line is printed as its notebook finishes."""

    def done(name: str, result: Result) -> Result:
        result = dataclasses.replace(result, name=name)
        print(f"{name}: {'ok' if result.error is None else 'FAILED'} ({result.seconds:.1f} s)")
        if result.error is not None:
            print("    " + result.error.replace("\n", "\n    "))
        return result

    results = [done(names[0], run_notebook(staged[0], timeout))]
    rest = list(zip(names[1:], staged[1:], strict=True))
    if jobs == 1:
        return results + [done(name, run_notebook(path, timeout)) for name, path in rest]
    # Processes, not threads: each kernel client runs its own event loop. "spawn" starts each
    # from this script, with the environment set above.
    context = multiprocessing.get_context("spawn")
    by_name: dict[str, Result] = {}
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        futures = {pool.submit(run_notebook, path, timeout): name for name, path in rest}
        for future in concurrent.futures.as_completed(futures):
            by_name[futures[future]] = done(futures[future], future.result())
    return results + [by_name[name] for name, _ in rest]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built site (_build/html)")
    parser.add_argument("--only", action="append", default=[], help="page name pattern (fnmatch)")
    parser.add_argument("--keep", type=Path, help="copy the executed notebooks into this folder")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a cell may take")
    parser.add_argument(
        "--jobs", type=_positive, default=1, help="notebooks run at a time (after the first)"
    )
    parser.add_argument(
        "--allow-installed",
        action="store_true",
        help="run even where the package is importable already (then no setup cell installs it)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    site = args.site.resolve()
    try:
        names = site_notebooks(site, args.only)
        wheel = site_wheel(site)
        if not args.allow_installed and importlib.util.find_spec("examples") is not None:
            raise RunError(
                "the package `examples` is importable here before any notebook ran, so no setup "
                "cell would install it: uninstall it (`nox -s notebooks` does), or pass "
                "--allow-installed"
            )
        workdir = Path(tempfile.mkdtemp(prefix="remat-notebooks-"))
        if not outside_repository(workdir):
            raise RunError(f"the temporary folder {workdir} is inside the repository: set TMPDIR")
    except RunError as error:
        print(f"run_notebooks: {error}", file=sys.stderr)
        return 2
    print(f"{len(names)} notebooks from {site}, wheel {wheel.name}, run in {workdir}")
    staged = stage(site, names, workdir)
    write_kernelspec(workdir / "jupyter")
    # The kernels inherit this process's environment: the reader's (JAX's compilation cache
    # among it), less the repository's paths. Computed before the old one is cleared.
    environment = reader_environment(workdir, wheel)
    os.environ.clear()
    os.environ.update(environment)
    start = time.perf_counter()
    results = run_all(names, staged, args.timeout, args.jobs)
    total = time.perf_counter() - start
    source = installed_from()
    print(f"\nthe package came from {source}")
    print(report(results, total))
    status = 0 if all(r.error is None for r in results) else 1
    if not args.allow_installed and not same_file(source, wheel):
        print(f"the package was not installed from {wheel} by a setup cell", file=sys.stderr)
        status = 1
    if args.keep:
        shutil.copytree(workdir, args.keep, dirs_exist_ok=True)
    if status == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print(f"the executed notebooks are in {workdir}")
    return status


if __name__ == "__main__":
    sys.exit(main())
