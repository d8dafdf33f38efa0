"""Run a problem's checks on a learner's function, and report each result as an event.

This is the half of the checker that runs next to the learner's code. :mod:`examples.check`
starts it as a child process (``python -P -m examples.problems._runner ...``) and judges what it
reports; ``check_function`` (for notebooks) calls :func:`run_checks` in its own process.

Events are dictionaries, written by the child as JSON lines to a file descriptor of its own (the
learner's ``print`` goes to stdout and stderr, which the parent keeps apart):

- ``{"event": "ready", "checks": [...], "output_offset": N}``: the inputs and the reference's
  yardsticks are ready; the learner's file is loaded next. ``output_offset`` is where the child's
  output file stood then, so that the parent shows only what the learner's code printed.
- ``{"event": "begin", "check": NAME}``, then ``{"event": "result", "check": NAME, "passed": ...,
  "detail": ...}`` for each check (``"load"`` first);
- ``{"event": "skipped", "checks": [...]}`` after a failed fatal check;
- ``{"event": "done"}`` at the very end. A run that ends without it did not finish.

Each event also carries ``"token"``: a secret of the run that the parent writes to the child's
stdin, read before the learner's file is loaded; the parent ignores a line without it.

FILE is compiled and executed in memory (no import, no ``__pycache__``); its folder is not put on
``sys.path``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
import traceback
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from examples.problems._check_names import CONFIG_CHECK, LOAD_CHECK, check_names
from examples.problems._hints import hint as _hint

Report = Callable[[dict[str, Any]], None]


class SolutionTimeout(BaseException):
    """Raised in the main thread when an in-process time limit passes (a BaseException, so that
    a learner's ``except Exception`` cannot swallow it)."""


class LoadError(Exception):
    """The learner's file could not be turned into a function; the message says why."""


@dataclasses.dataclass
class Solution:
    """A learner's function and where it came from (for naming their frames in errors)."""

    fn: Callable[..., Any]
    filename: str  #: the path the code was compiled with (matches traceback frames)
    display: str  #: the path as the learner typed it (or the function's name)
    from_file: bool = True  #: False for a function handed over directly (a notebook's)


# --- describing what the learner's code did ------------------------------------------------------


def scrubbed(text: str) -> str:
    from examples.tools.paths import scrub_paths

    return scrub_paths(text)


#: The sentence of JAX's tracer errors that names the argument a value came from; kept when the
#: rest of a long message is cut.
_NAMES_ARGUMENT = re.compile(r"[^.]*because it depends on the value of [^.]*\.")


def exception_line(err: BaseException) -> str:
    """``"ValueError: the message"`` on one line, paths of this machine scrubbed.

    A message over 300 characters is cut, keeping the sentence of JAX's tracer errors that names
    the argument the value came from."""
    first = " ".join(str(err).split())  # one line, however many the message had
    if len(first) > 300:
        names = _NAMES_ARGUMENT.search(first)
        if names and names.end() > 297:
            start = first[: max(297 - len(names[0]) - 5, 100)]
            start = start[: start.rfind(". ") + 1] or start  # whole sentences where it can
            first = f"{start} ... {names[0].strip()}"
        else:
            first = first[:297] + "..."
    return f"{type(err).__name__}: {scrubbed(first)}" if first else type(err).__name__


def learner_frame(err: BaseException, filename: str, display: str) -> str | None:
    """``"my_solution.py:12 in forward"``: the deepest frame of the learner's file in ``err``.

    Looks through the exception's chain too (JAX re-raises some errors from a filtered copy).
    """
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        best = None
        for frame in traceback.extract_tb(current.__traceback__):
            if frame.filename == filename:
                best = f"{display}:{frame.lineno} in {frame.name}"
        if best is not None:
            return best
        current = current.__cause__ or current.__context__
    return None


#: Set by the child: the memory limit in MiB, named when the learner's code runs out of memory.
_memory_limit_mib: int | None = None


def what_it_did(err: BaseException, solution: Solution | None, during: str) -> str:
    """One line naming what the learner's code raised, where, and what that means here."""
    if isinstance(err, SystemExit):
        what = f"called sys.exit({err.code!r}) (SystemExit)"
    elif isinstance(err, KeyboardInterrupt):
        what = "raised KeyboardInterrupt"
    else:
        what = f"raised {exception_line(err)}"
    where = solution and learner_frame(err, solution.filename, solution.display)
    if where:
        line = f"your code {what} at {where} {during}"
    elif isinstance(err, SystemExit | KeyboardInterrupt):
        line = f"your code {what} {during}"
    else:  # raised outside the learner's file: in JAX or Flax, called the way the code asked
        line = f"calling your function {during} failed: {exception_line(err)}"
    text = str(err)
    if _memory_limit_mib and (isinstance(err, MemoryError) or "RESOURCE_EXHAUSTED" in text):
        line += f" (the checker allows {_memory_limit_mib} MiB; --memory-limit MIB changes that)"
    hint = _hint(err, text, solution.fn if solution else None)
    return f"{line}; {hint}" if hint else line


# --- loading --------------------------------------------------------------------------------------


def load_solution(path: str | os.PathLike[str], name: str, display: str | None = None) -> Solution:
    """Compile and run ``path`` in a fresh module and return its function ``name``.

    Raises :class:`LoadError` with a one-line reason for a missing file, a syntax error, anything
    raised while the module runs (``SystemExit`` and ``KeyboardInterrupt`` included), or a missing
    or non-callable ``name``.
    """
    display = os.fspath(path) if display is None else display
    file = Path(path)
    if not file.is_file():
        raise LoadError(f"no such file: {display}")
    filename = str(file.resolve())
    source = file.read_bytes()
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as err:
        raise LoadError(f"{display} has a syntax error on line {err.lineno}: {err.msg}") from None
    except ValueError as err:  # null bytes and the like
        raise LoadError(f"{display} cannot be compiled: {err}") from None
    module_name = f"_remat_check_solution_{name}"
    module = types.ModuleType(module_name)
    module.__file__ = filename
    # Registered while it runs, for libraries that look a class's module up (dataclasses, flax).
    sys.modules[module_name] = module
    previous = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    solution = Solution(fn=lambda: None, filename=filename, display=display)
    try:
        exec(code, module.__dict__)
    except SolutionTimeout:
        raise
    except BaseException as err:
        raise LoadError(what_it_did(err, solution, "while loading")) from None
    finally:
        sys.dont_write_bytecode = previous
    fn = module.__dict__.get(name)
    if fn is None:
        defined = sorted(
            k
            for k, v in module.__dict__.items()
            if callable(v)
            and not k.startswith("_")
            and getattr(v, "__module__", None) == module_name
        )
        found = f" (it defines: {', '.join(defined)})" if defined else ""
        raise LoadError(f"{display} defines no function named {name}{found}")
    if not callable(fn):
        kind = type(fn).__name__
        raise LoadError(f"{display} defines {name}, but it is a {kind}, not a function")
    solution.fn = fn
    return solution


# --- JAX's global configuration ------------------------------------------------------------------


def config_snapshot() -> dict[str, Any]:
    import jax

    return dict(jax.config.values)


def config_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """``["jax_enable_x64 False -> True", ...]`` for every option whose value changed."""
    changed = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        try:
            same = bool(old == new)
        except Exception:
            same = old is new
        if not same:
            changed.append(f"{key} {old!r} -> {new!r}")
    return changed


def config_check(before: dict[str, Any]) -> tuple[bool, str]:
    changes = config_changes(before, config_snapshot())
    if not changes:
        return True, "your code left JAX's global configuration as it found it"
    return False, (
        f"your code changed JAX's global configuration ({'; '.join(changes)}); a solution must "
        "not, since the change would apply to every computation of the program that uses it"
    )


# --- running the checks ---------------------------------------------------------------------------


def run_checks(
    problem: Any,
    load: Callable[[], Solution],
    prepared: Any,
    report: Report,
    before: dict[str, Any] | None = None,
) -> bool:
    """Load the solution, run ``problem``'s checks on it and ``report`` each result; True if all
    pass. ``before`` is JAX's configuration before any learner code ran (default: now)."""
    import jax

    from examples.problems._checks import standard_checks

    before = config_snapshot() if before is None else before
    passed = True

    def result(name: str, ok: bool, detail: str) -> None:
        nonlocal passed
        passed = passed and ok
        report({"event": "result", "check": name, "passed": ok, "detail": detail})

    report({"event": "begin", "check": LOAD_CHECK})
    try:
        solution = load()
    except LoadError as err:
        result(LOAD_CHECK, False, str(err))
        checks: list[Any] = []
    else:
        result(
            LOAD_CHECK,
            True,
            f"{solution.display} defines {problem.name}"
            if solution.from_file
            else f"given the function {solution.display}",
        )
        checks = standard_checks(problem, solution.fn, prepared)
    # Full float32 matrix products, so that a GPU's TF32 or a TPU's bfloat16 passes do not count
    # against a correct solution.
    with jax.default_matmul_precision("highest"):
        for index, (name, fatal, check) in enumerate(checks):
            report({"event": "begin", "check": name})
            try:
                ok, detail = check()
            except SolutionTimeout:
                raise
            except BaseException as err:  # SystemExit and KeyboardInterrupt too
                ok, detail = False, what_it_did(err, solution, f"during the {name} check")
            result(name, ok, detail)
            if not ok and fatal:
                report({"event": "skipped", "checks": [n for n, _, _ in checks[index + 1 :]]})
                break
    if not checks:
        report({"event": "skipped", "checks": check_names()[1:-1]})
    report({"event": "begin", "check": CONFIG_CHECK})
    result(CONFIG_CHECK, *config_check(before))
    report({"event": "done"})
    return passed


# --- the child process ---------------------------------------------------------------------------


def _limit_memory(mib: int) -> None:
    """Make an allocation past ``mib`` fail with MemoryError (CPU backend, Linux).

    ``RLIMIT_DATA`` counts the heap and private mappings (what NumPy and XLA's CPU allocator use)
    but not the address space that accelerator runtimes reserve, which ``RLIMIT_AS`` would. The
    parent also watches the process's resident memory, on every backend.
    """
    global _memory_limit_mib
    _memory_limit_mib = mib
    import jax

    try:
        import resource
    except ImportError:  # not POSIX
        return
    if jax.default_backend() != "cpu" or not hasattr(resource, "RLIMIT_DATA"):
        return
    limit = mib * 2**20
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def _stdin_from_devnull() -> None:
    """Give the learner's code an empty stdin, as ``stdin=DEVNULL`` would."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
    finally:
        os.close(devnull)


def child_main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="examples.problems._runner")
    parser.add_argument("--problem", required=True)
    parser.add_argument("--file", required=True)
    parser.add_argument("--display", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--report-fd", type=int, required=True)
    parser.add_argument("--memory-limit", type=int, default=0)
    args = parser.parse_args(argv)
    # The parent's per-run token, on stdin, read before any learner code runs; every event
    # carries it, so that lines the learner's code writes to the report pipe are told apart.
    token = sys.stdin.readline().strip()
    _stdin_from_devnull()
    channel = os.fdopen(args.report_fd, "w", buffering=1, encoding="utf-8")

    def report(event: dict[str, Any]) -> None:
        channel.write(json.dumps({**event, "token": token}) + "\n")
        channel.flush()

    from examples.problems import load_problem
    from examples.problems._checks import prepare

    problem = load_problem(args.problem)
    prepared = prepare(problem, args.seed)
    if args.memory_limit > 0:
        _limit_memory(args.memory_limit)
    before = config_snapshot()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        offset = os.lseek(1, 0, os.SEEK_CUR)
    except OSError:  # stdout is not a file
        offset = 0
    report({"event": "ready", "checks": check_names(), "output_offset": offset})
    run_checks(
        problem,
        lambda: load_solution(args.file, problem.name, args.display),
        prepared,
        report,
        before,
    )
    channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
