"""Check a solution to one of the site's problems: ``python -m examples.check PROBLEM FILE``.

The checker loads the function named PROBLEM from FILE and runs the problem's checks on fresh
random inputs of several shapes (see :mod:`examples.problems`): the value against a float64
reference, the output's shape and dtype, the gradient, and whether the function really uses
gradient checkpointing with the required policy (read off the traced jaxpr and off what the
backward pass keeps). It prints one line per check and exits with

- ``0`` when every check passes,
- ``1`` when the solution is wrong, cannot be loaded, raises, or runs out of time,
- ``2`` for a usage error: no or unknown PROBLEM, no such FILE.

FILE is never written to, and nothing is written next to it: it is read, compiled and executed
in memory (no import, so no ``__pycache__``). Its directory is not put on ``sys.path``.

Time limit (``--timeout``, 60 s by default): on POSIX, in the main thread, a ``SIGALRM`` timer
interrupts Python code that runs too long. From the command line, a watchdog thread also ends the
process a little later if the learner's code is stuck where a signal cannot interrupt it (inside
one long XLA computation, say).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from examples.paths import scrub_paths
from examples.problems import PROBLEMS, Problem

DEFAULT_TIMEOUT = 60.0
#: Extra seconds the command-line watchdog waits after the soft limit before ending the process.
HARD_GRACE = 15.0


class SolutionTimeout(BaseException):
    """Raised in the main thread when the time limit passes (a BaseException, so that a
    learner's ``except Exception`` cannot swallow it)."""


class LoadError(Exception):
    """The learner's file could not be turned into a function; the message says why."""


@dataclasses.dataclass
class Solution:
    """A learner's function and where it came from (for naming their frames in errors)."""

    fn: Callable[..., Any]
    filename: str  #: the path the code was compiled with (matches traceback frames)
    display: str  #: the path as the learner typed it


# --- loading --------------------------------------------------------------------------------------


def load_solution(path: str | os.PathLike[str], name: str) -> Solution:
    """Compile and run ``path`` in a fresh module and return its function ``name``.

    Raises :class:`LoadError` with a one-line reason for a missing file, a syntax error, an
    exception while the module runs, or a missing or non-callable ``name``.
    """
    display = os.fspath(path)
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
    try:
        exec(code, module.__dict__)
    except SolutionTimeout:
        raise
    except BaseException as err:
        where = learner_frame(err, filename, display)
        raise LoadError(
            f"{display} raised {_exception_line(err)} while loading"
            + (f", at {where}" if where else "")
        ) from None
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
    return Solution(fn=fn, filename=filename, display=display)


def learner_frame(err: BaseException, filename: str, display: str) -> str | None:
    """``"my_solution.py:12 in forward"``: the deepest frame of the learner's file in ``err``.

    Looks through the exception's chain too (JAX re-raises some errors from a filtered copy).
    """
    seen: set[int] = set()
    best = None
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame in traceback.extract_tb(current.__traceback__):
            if frame.filename == filename:
                best = f"{display}:{frame.lineno} in {frame.name}"
        if best is not None:
            return best
        current = current.__cause__ or current.__context__
    return best


def _exception_line(err: BaseException) -> str:
    first = " ".join(str(err).split())  # one line, however many the message had
    if len(first) > 300:
        first = first[:297] + "..."
    return f"{type(err).__name__}: {scrub_paths(first)}" if first else type(err).__name__


# --- the time limit -------------------------------------------------------------------------------


@contextlib.contextmanager
def time_limit(seconds: float, hard: bool = False) -> Iterator[None]:
    """Raise :class:`SolutionTimeout` in the main thread after ``seconds`` (POSIX).

    With ``hard``, a watchdog thread also ends the whole process ``HARD_GRACE`` seconds later, for
    code that a signal cannot interrupt. Only the command line asks for that: it would end a test
    run or a notebook kernel too.
    """
    in_main_thread = threading.current_thread() is threading.main_thread()
    use_signal = hasattr(signal, "SIGALRM") and in_main_thread
    previous_handler = None
    previous_timer = (0.0, 0.0)
    started = time.monotonic()
    watchdog = None
    if use_signal:

        def on_alarm(signum: int, frame: Any) -> None:
            raise SolutionTimeout

        previous_handler = signal.signal(signal.SIGALRM, on_alarm)
        previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    if hard:

        def give_up() -> None:
            print(
                f"FAIL  time limit: still running after {seconds + HARD_GRACE:g} s; "
                "ending the check",
                flush=True,
            )
            os._exit(1)

        watchdog = threading.Timer(seconds + (HARD_GRACE if use_signal else 0.0), give_up)
        watchdog.daemon = True
        watchdog.start()
    try:
        yield
    finally:
        if use_signal:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous_handler)
            # Someone else's timer (pytest-timeout's, say) was running: give it back its rest.
            delay, interval = previous_timer
            if delay > 0:
                left = max(delay - (time.monotonic() - started), 0.001)
                signal.setitimer(signal.ITIMER_REAL, left, interval)
        if watchdog is not None:
            watchdog.cancel()


# --- running the checks ---------------------------------------------------------------------------


def run_checks(
    problem: Problem, solution: Solution, seed: int, out: Callable[[str], None] = print
) -> bool:
    """Run ``problem``'s checks on ``solution`` and print one line each; True if all pass."""
    cases = problem.make_cases(np.random.default_rng(seed))
    checks = problem.checks(solution.fn, cases)
    passed = 0
    # Full float32 matrix products, so that a GPU's TF32 or a TPU's bfloat16 passes do not count
    # against a correct solution.
    with jax.default_matmul_precision("highest"):
        for index, (name, fatal, check) in enumerate(checks):
            try:
                ok, detail = check()
            except SolutionTimeout:
                raise
            except Exception as err:
                ok = False
                where = learner_frame(err, solution.filename, solution.display)
                if where:
                    detail = f"your function raised {_exception_line(err)} at {where}"
                else:
                    detail = f"calling your function failed: {_exception_line(err)}"
            out(f"{'PASS' if ok else 'FAIL'}  {name:<10} {detail}")
            passed += ok
            if not ok and fatal:
                rest = [n for n, _, _ in checks[index + 1 :]]
                out(
                    f"skipped    {', '.join(rest)} (they need a function that runs and returns "
                    "the right kind of output)"
                )
                break
    out(f"{passed} of {len(checks)} checks passed.")
    return passed == len(checks)


def check_function(
    problem: str, fn: Callable[..., Any], seed: int | None = None, timeout: float = DEFAULT_TIMEOUT
) -> int:
    """Check a function object directly (for a notebook); returns the exit status ``main`` would."""
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "<unknown>")
    solution = Solution(fn=fn, filename=filename, display=getattr(fn, "__name__", "solution"))
    seed = _fresh_seed() if seed is None else seed
    print(f"Checking {solution.display} for problem {problem}; inputs from --seed {seed}")
    try:
        with time_limit(timeout):
            return 0 if run_checks(PROBLEMS[problem], solution, seed) else 1
    except SolutionTimeout:
        print(_timeout_line(timeout))
        return 1


def _fresh_seed() -> int:
    return int(np.random.default_rng().integers(0, 2**31 - 1))


def _timeout_line(timeout: float) -> str:
    return (
        f"FAIL  time limit: the solution did not finish within {timeout:g} s "
        "(an endless loop? pass --timeout SECONDS to allow longer)"
    )


# --- the command line -----------------------------------------------------------------------------


def _problem_list() -> str:
    width = max(len(name) for name in PROBLEMS)
    return "\n".join(
        f"  {p.name:<{width}}  {p.topic}, {p.difficulty}: {p.signature}" for p in PROBLEMS.values()
    )


USAGE = "python -m examples.check PROBLEM FILE [--timeout SECONDS] [--seed N]"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m examples.check",
        usage=USAGE,
        description="Check a solution to one of the JAX Remat Guide's problems.",
        epilog="problems:\n" + _problem_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("problem", metavar="PROBLEM", help="the problem's id (its function name)")
    parser.add_argument("file", metavar="FILE", help="your solution, a Python file")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit for loading and checking (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the random inputs")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checker; return the exit status (0 all passed, 1 wrong, 2 usage error).

    Called without ``argv`` (from the command line) it also arms the hard watchdog (see
    :func:`time_limit`).
    """
    hard = argv is None
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        print(f"usage: {USAGE}\n\nproblems:\n{_problem_list()}")
        return 2
    try:
        args = _parser().parse_args(args_list)
    except SystemExit as stop:  # argparse has printed the reason
        return 0 if stop.code == 0 else 2
    problem = PROBLEMS.get(args.problem)
    if problem is None:
        print(f"unknown problem {args.problem!r}; the problems are:\n{_problem_list()}")
        return 2
    if not Path(args.file).is_file():
        print(f"no such file: {args.file}")
        return 2
    if args.timeout <= 0:
        print("--timeout must be a positive number of seconds")
        return 2
    seed = _fresh_seed() if args.seed is None else args.seed
    print(f"Checking {args.file} for problem {problem.name}; inputs from --seed {seed}")
    module_name = f"_remat_check_solution_{problem.name}"
    try:
        with time_limit(args.timeout, hard=hard):
            solution = load_solution(args.file, problem.name)
            return 0 if run_checks(problem, solution, seed) else 1
    except LoadError as err:
        print(f"FAIL  load       {err}")
        return 1
    except SolutionTimeout:
        print(_timeout_line(args.timeout))
        return 1
    finally:
        sys.modules.pop(module_name, None)


if __name__ == "__main__":
    sys.exit(main())
