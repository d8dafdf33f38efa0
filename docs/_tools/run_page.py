"""Execute one or more pages as the site build would, without building the site.

    .nox/docs/bin/python docs/_tools/run_page.py docs/howto/measure-memory.md [...]

Each page (a MyST text notebook) is read with MyST-NB's own reader and executed with nbclient in
the page's folder, cells tagged ``raises-exception`` allowed to raise, every other raising cell
reported with its page, cell number and error. For writing a page: a full ``nox -s docs`` executes
every page again whenever anything under ``src/examples/`` changes; this runs only the pages named.
``--save DIR`` writes each executed notebook there (to read its outputs).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import nbformat
from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[2]


def run(page: Path, save: Path | None, timeout: int) -> bool:
    notebook = read_myst_markdown_notebook(page.read_text())
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(page.parent)}},
        allow_error_names=(),
    )
    start = time.perf_counter()
    ok = True
    try:
        client.execute()
    except CellExecutionError as error:
        ok = False
        print(f"FAILED {page}: {str(error)[-3000:]}", file=sys.stderr)
    took = time.perf_counter() - start
    print(f"{'ok' if ok else 'FAILED'}  {took:6.1f} s  {page}")
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, save / (page.stem + ".ipynb"))
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args(argv)
    # Absolute: each kernel runs in its page's folder, where a relative path would make a cache.
    cache = os.environ.get("JAX_COMPILATION_CACHE_DIR", str(ROOT / "_build" / "jax-cache"))
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(Path(cache).resolve())
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    results = [run(page.resolve(), args.save, args.timeout) for page in args.pages]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
