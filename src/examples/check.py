"""Check a solution to one of the site's problems: ``python -m examples.check PROBLEM FILE``.

The checker runs the learner's code in a child process of its own and judges what that process
reports (:mod:`examples.problems._runner`): one line per check, from loading the file through the
value and the gradient against a float64 reference to the structure only a checkpoint has (the
checkpoint in the traced program, its policy, what the backward pass keeps), and last whether the
code left JAX's global configuration alone. Whatever the learner's code does (ends the process
with any status, raises anything, prints, hangs, allocates far too much memory, changes JAX's
configuration), the verdict is the checker's: the exit status is

- ``0`` when every check reported a pass and the child finished,
- ``1`` when a check failed or the run did not finish (one line says what the code did),
- ``2`` for a usage error: no or unknown PROBLEM, no such FILE, a bad option.

What the learner's code printed is shown after the checks, under its own heading.

FILE is never written to, and nothing is written next to it (the child executes it in memory;
its printed output goes to a temporary folder that is removed afterwards). Its directory is not put
on ``sys.path``. Limits: ``--timeout`` (60 s of the learner's code by default; the child is
then killed) and ``--memory-limit`` (4096 MiB of resident memory by default, watched through
``/proc`` on Linux, with an ``RLIMIT_DATA`` in the child on the CPU backend).

The child reports on a pipe, each event with a per-run token that it reads from its stdin before
any learner code runs; a line without it is not believed, and a ``report`` line fails the run.
Processes the learner's code starts are ended with the child, even those in a session of their
own (:mod:`examples.problems._process`).

The child is not a sandbox: code that sets out to fool the checker can (it runs with the
learner's rights, in the same interpreter as the checks). It guards against what honest code
does by accident.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from examples.problems import problem_names
from examples.problems._check_names import CONFIG_CHECK
from examples.problems._process import (
    DEFAULT_MEMORY_MIB,
    DEFAULT_TIMEOUT,
    SETUP_LIMIT,
    Outcome,
    Tally,
    ended_how,
    run_child,
)
from examples.problems._runner import SolutionTimeout

#: How much of the learner's printed output is shown.
MAX_OUTPUT_LINES = 60
MAX_OUTPUT_CHARS = 8000

USAGE = "python -m examples.check PROBLEM FILE [--timeout SECONDS] [--memory-limit MIB] [--seed N]"

Out = Callable[[str], None]


# --- the verdict ----------------------------------------------------------------------------------


def _reason_unfinished(outcome: Outcome, tally: Tally, timeout: float, memory: int) -> str:
    during = f"during the {tally.current} check" if tally.current else "after the last check"
    if outcome.stopped == "time":
        return (
            f"time limit: your code did not finish within {timeout:g} s ({during}; an endless "
            "loop? --timeout SECONDS allows longer)"
        )
    if outcome.stopped == "memory":
        return (
            f"memory limit: the process running your code used more than {memory} MiB "
            f"({during}); --memory-limit MIB allows more"
        )
    how = ended_how(outcome.returncode if outcome.returncode is not None else -9)
    return (
        f"your code ended the process that ran it ({during}): it {how}, as os._exit() or a crash "
        "in native code does, so the checks could not finish"
    )


def _last_error(text: str) -> str:
    """The exception line of a traceback in ``text`` (else its last line), paths scrubbed."""
    from examples.tools.paths import scrub_paths

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", line)]
    found = (errors or lines or ["(it printed nothing)"])[-1]
    return scrub_paths(found if len(found) <= 300 else found[:297] + "...")


def _ended(outcome: Outcome) -> str:
    if outcome.stopped == "time":
        return f"was still starting after {SETUP_LIMIT:g} s"
    return ended_how(outcome.returncode if outcome.returncode is not None else -9)


def _show_output(text: str, out: Out) -> None:
    """What the learner's code printed, under its own heading, each line marked."""
    if not text.strip():
        return
    lines = text.rstrip("\n").splitlines()
    cut = ""
    if len(lines) > MAX_OUTPUT_LINES or len(text) > MAX_OUTPUT_CHARS:
        kept = []
        size = 0
        for line in lines[:MAX_OUTPUT_LINES]:
            size += len(line) + 1
            if size > MAX_OUTPUT_CHARS:
                break
            kept.append(line)
        cut = f"| ... {len(lines) - len(kept)} more lines not shown"
        lines = kept
    out("")
    out("What your code printed (stdout and stderr, while it was loaded and checked):")
    for line in lines:
        out(f"| {line}")
    if cut:
        out(cut)
    out("")


def check_file(
    problem: str,
    file: str,
    seed: int,
    timeout: float = DEFAULT_TIMEOUT,
    memory_limit_mib: int = DEFAULT_MEMORY_MIB,
    out: Out = print,
    kernel_limit: bool = True,
) -> int:
    """Check ``file``'s solution to ``problem`` in a child process; return the exit status."""
    tally = Tally(out)
    outcome = run_child(problem, file, seed, tally, timeout, memory_limit_mib, kernel_limit)
    finished = tally.done and outcome.stopped is None
    if not tally.ready and outcome.stopped != "memory":
        # It failed before any learner code ran: the checker's own trouble, not the solution's.
        last = _last_error(outcome.setup_output)
        tally.fail_unfinished(
            "setup",
            f"the checking process {_ended(outcome)} before loading your file: {last}",
        )
    elif not finished:
        check = tally.current or CONFIG_CHECK
        tally.fail_unfinished(check, _reason_unfinished(outcome, tally, timeout, memory_limit_mib))
    elif outcome.returncode != 0:
        tally.fail_unfinished(
            "exit",
            f"the checks finished, but then the process {ended_how(outcome.returncode or 0)} "
            "(an atexit handler of your code?)",
        )
    if outcome.forged:
        tally.fail_extra(
            "report",
            f"{outcome.forged} line(s) reached the checker's report channel without this run's "
            "token, so they did not come from the checker and were ignored: does your code "
            "write to file descriptors it did not open?",
        )
    _show_output(outcome.output, out)
    out(tally.summary())
    ok = tally.all_passed and finished and outcome.returncode == 0 and not outcome.forged
    return 0 if ok else 1


# --- in this process, for a notebook -------------------------------------------------------------


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`SolutionTimeout` in the main thread after ``seconds`` (POSIX).

    Code stuck where a signal cannot reach it (inside one long XLA computation) is interrupted
    only when it returns to Python.
    """
    use_signal = (
        hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()
    )
    if not use_signal:
        yield
        return
    started = time.monotonic()

    def on_alarm(signum: int, frame: Any) -> None:
        raise SolutionTimeout

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        # Someone else's timer (pytest-timeout's, say) was running: give it back its rest.
        delay, interval = previous_timer
        if delay > 0:
            left = max(delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, interval)


def check_function(
    problem: str, fn: Callable[..., Any], seed: int | None = None, timeout: float = DEFAULT_TIMEOUT
) -> int:
    """Check a function object in this process (a notebook's); return the exit status.

    It runs here, not in a child process, because a notebook's function usually leans on the
    notebook: classes and helpers defined in other cells, closures, imports made earlier. Its
    source alone would not run anywhere else. The price: what the function does to this process
    (ending it, changing JAX's configuration, using all the memory) is not contained, so the
    check says so, and the command line remains the guarded way.
    """
    from examples.problems import load_problem
    from examples.problems._checks import prepare
    from examples.problems._runner import Solution, config_snapshot, run_checks

    spec = load_problem(problem)
    filename = getattr(getattr(fn, "__code__", None), "co_filename", "<unknown>")
    name = getattr(fn, "__name__", "solution")
    solution = Solution(fn=fn, filename=filename, display=name, from_file=False)
    seed = _fresh_seed() if seed is None else seed
    print(
        f"Checking {name} for problem {problem} in this process; inputs from --seed {seed}. "
        "(Not guarded: for that, save it in a file and run python -m examples.check.)"
    )
    tally = Tally(print)
    prepared = prepare(spec, seed)
    before = config_snapshot()
    try:
        with time_limit(timeout):
            run_checks(spec, lambda: solution, prepared, tally.event, before)
    except SolutionTimeout:
        tally.fail_unfinished(
            tally.current or CONFIG_CHECK,
            f"time limit: the function did not finish within {timeout:g} s",
        )
    print(tally.summary())
    return 0 if tally.all_passed else 1


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "little") % (2**31 - 1)


# --- the command line -----------------------------------------------------------------------------


def _problem_list() -> str:
    from examples.problems import all_problems

    problems = all_problems()
    width = max(len(p.name) for p in problems)
    return "\n".join(
        f"  {p.name:<{width}}  {p.topic}, {p.difficulty}: {p.signature}" for p in problems
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m examples.check",
        usage=USAGE,
        description="Check a solution to one of the JAX Remat Guide's problems.",
        epilog="the problems: python -m examples.check (no arguments) lists them",
    )
    parser.add_argument("problem", metavar="PROBLEM", help="the problem's id (its function name)")
    parser.add_argument("file", metavar="FILE", help="your solution, a Python file")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit for your code, loading and checks (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--memory-limit",
        type=int,
        default=DEFAULT_MEMORY_MIB,
        metavar="MIB",
        help=f"memory limit of the process running your code (default {DEFAULT_MEMORY_MIB})",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the random inputs")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the checker; return the exit status (0 all passed, 1 wrong, 2 usage error)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list:
        print(f"usage: {USAGE}\n\nproblems:\n{_problem_list()}")
        return 2
    try:
        args = _parser().parse_args(args_list)
    except SystemExit as stop:  # argparse has printed the reason
        return 0 if stop.code == 0 else 2
    if args.problem not in problem_names():
        print(f"unknown problem {args.problem!r}; the problems are:\n{_problem_list()}")
        return 2
    if not Path(args.file).is_file():
        print(f"no such file: {args.file}")
        return 2
    if args.timeout <= 0:
        print("--timeout must be a positive number of seconds")
        return 2
    if args.memory_limit <= 0:
        print("--memory-limit must be a positive number of MiB")
        return 2
    seed = _fresh_seed() if args.seed is None else args.seed
    print(f"Checking {args.file} for problem {args.problem}; inputs from --seed {seed}")
    try:
        return check_file(args.problem, args.file, seed, args.timeout, args.memory_limit)
    except KeyboardInterrupt:
        print("interrupted: the check did not finish")
        return 1


if __name__ == "__main__":
    sys.exit(main())
