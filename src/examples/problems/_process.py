"""The checker's parent side: start the child that runs the learner's code, watch it, tally it.

:func:`run_child` starts ``python -P -m examples.problems._runner`` in a session of its own, reads
the events it writes to a pipe (see :mod:`examples.problems._runner`), and ends it when it runs past
its time or memory limit. Its stdout and stderr go to a file in a temporary folder, so that what the
learner's code printed is kept apart from the verdict. :class:`Tally` turns the events into the
checker's lines and knows whether every check passed. This module imports neither JAX nor the
problem modules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from examples.problems._check_names import check_names

DEFAULT_TIMEOUT = 60.0
DEFAULT_MEMORY_MIB = 4096
#: Seconds the child may take to import JAX and draw its inputs, before any learner code runs.
SETUP_LIMIT = 300.0
#: How often the parent looks at the child's memory and clock.
POLL_S = 0.02

Out = Callable[[str], None]


# --- lines ------------------------------------------------------------------------------------


def result_line(check: str, passed: bool, detail: str) -> str:
    return f"{'PASS' if passed else 'FAIL'}  {check:<10} {detail}"


def skipped_line(checks: Sequence[str], why: str) -> str:
    return f"skipped    {', '.join(checks)} ({why})"


class Tally:
    """The checks' results as they arrive; the verdict is read off it."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.expected: list[str] = check_names()
        self.results: dict[str, bool] = {}
        self.current: str | None = None
        self.done = False
        self.ready = False  #: the child got as far as loading the learner's file

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind == "ready":
            self.ready = True
            self.expected = list(event["checks"])
        elif kind == "begin":
            self.current = str(event["check"])
        elif kind == "result":
            name, passed = str(event["check"]), event["passed"] is True
            self.results[name] = passed
            self.current = None
            self.out(result_line(name, passed, str(event["detail"])))
        elif kind == "skipped" and event["checks"]:
            self.out(
                skipped_line(
                    event["checks"],
                    "they need a function that loads, runs and returns the right kind of output",
                )
            )
        elif kind == "done":
            self.done = True

    def fail_unfinished(self, check: str, detail: str) -> None:
        """Report the run's end: a failure of the check under way, the rest not run."""
        self.results[check] = False
        self.out(result_line(check, False, detail))
        rest = [c for c in self.expected if c not in self.results]
        if rest:
            self.out(skipped_line(rest, "the process that ran your code did not finish"))

    @property
    def passed(self) -> int:
        return sum(self.results.values())

    @property
    def all_passed(self) -> bool:
        return (
            self.done
            and all(name in self.results for name in self.expected)
            and all(self.results.values())
        )

    def summary(self) -> str:
        return f"{self.passed} of {len(self.expected)} checks passed."


# --- the child process ----------------------------------------------------------------------------


def _package_root() -> str:
    """The folder that holds the ``examples`` package (``src/`` in a checkout)."""
    return str(Path(__file__).resolve().parents[2])


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"  # the learner's prints reach the file even if it exits hard
    # The problems are small; a GPU parent (a test run, a notebook) may hold most of the memory.
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def _rss_mib(pid: int) -> float | None:
    """Resident memory of ``pid`` in MiB, from /proc (Linux); None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """End the child and anything it started (it leads its own process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - not POSIX
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def ended_how(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


@dataclasses.dataclass
class Outcome:
    """How the child's run ended, besides what it reported."""

    stopped: str | None = None  #: why the parent ended it ("time", "memory"), if it did
    returncode: int | None = None
    output: str = ""  #: what the learner's code printed
    setup_output: str = ""  #: what the child printed before any learner code ran
    peak_rss_mib: float | None = None


def run_child(
    problem: str,
    file: str,
    seed: int,
    tally: Tally,
    timeout: float = DEFAULT_TIMEOUT,
    memory_limit_mib: int = DEFAULT_MEMORY_MIB,
    kernel_limit: bool = True,
) -> Outcome:
    """Run the checks in a child process, feeding its events to ``tally`` as they arrive.

    ``kernel_limit=False`` leaves out the child's ``RLIMIT_DATA``, so that only the parent's
    watch on resident memory enforces ``memory_limit_mib`` (the tests use it).
    """
    outcome = Outcome()
    with tempfile.TemporaryDirectory(prefix="remat-check-") as tmp:
        output_path = Path(tmp) / "output.txt"
        read_fd, write_fd = os.pipe()
        command = [
            *(sys.executable, "-P", "-m", "examples.problems._runner"),
            *("--problem", problem, "--file", str(Path(file).resolve()), "--display", file),
            *("--seed", str(seed), "--report-fd", str(write_fd)),
            *("--memory-limit", str(memory_limit_mib if kernel_limit else 0)),
        ]
        with output_path.open("wb") as output:
            try:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,),
                    env=_child_env(),
                    start_new_session=True,
                )
            finally:
                os.close(write_fd)
            try:
                offset = _watch(proc, read_fd, tally, outcome, timeout, memory_limit_mib)
            finally:
                os.close(read_fd)
                _kill(proc)  # whatever it left running
        outcome.returncode = proc.returncode
        data = output_path.read_bytes()
        if not tally.ready:  # all of it is the checker's own output
            offset = len(data)
        outcome.setup_output = data[:offset].decode("utf-8", "replace")
        outcome.output = data[offset:].decode("utf-8", "replace")
    return outcome


def _watch(
    proc: subprocess.Popen[bytes],
    read_fd: int,
    tally: Tally,
    outcome: Outcome,
    timeout: float,
    memory_limit_mib: int,
) -> int:
    """Read the child's events until it ends or a limit is hit; return the output offset."""
    offset = 0
    buffer = b""
    deadline = time.monotonic() + SETUP_LIMIT
    selector = selectors.DefaultSelector()
    selector.register(read_fd, selectors.EVENT_READ)
    open_pipe = True
    try:
        while True:
            if not open_pipe:
                time.sleep(POLL_S)
            elif selector.select(POLL_S):
                chunk = os.read(read_fd, 65536)
                open_pipe = bool(chunk)
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    event = _parse(line)
                    if event is None:
                        continue
                    if event.get("event") == "ready":
                        offset = int(event.get("output_offset", 0))
                        deadline = time.monotonic() + timeout
                    tally.event(event)
            if proc.poll() is not None:
                # Ended. Read what is still in the pipe; a grandchild may hold it open, so stop
                # as soon as it is quiet.
                if open_pipe and selector.select(0):
                    continue
                return offset
            rss = _rss_mib(proc.pid)
            if rss is not None:
                outcome.peak_rss_mib = max(outcome.peak_rss_mib or 0.0, rss)
            if memory_limit_mib > 0 and rss is not None and rss > memory_limit_mib:
                outcome.stopped = "memory"
                _kill(proc)
                return offset
            if time.monotonic() > deadline:
                outcome.stopped = "time"
                _kill(proc)
                return offset
    finally:
        selector.close()


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None
