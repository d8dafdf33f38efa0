"""The checker's parent side: start the child that runs the learner's code, watch it, tally it.

:func:`run_child` starts ``python -P -m examples.problems._runner`` in a session of its own, reads
the events it writes to a pipe (see :mod:`examples.problems._runner`), and ends it when it runs past
its time or memory limit. Its stdout and stderr go to a file in a temporary folder, so that what the
learner's code printed is kept apart from the verdict; it is read back through the open file, so
that code which removes the folder cannot make it vanish. Events must carry the run's token, and
the child's descendants are ended with it, even those that left its process group.
:class:`Tally` turns the events into the checker's lines and knows whether every check passed.
This module imports neither JAX nor the problem modules.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
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
#: How often the parent looks for processes the child started.
SCAN_S = 0.25

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

    def fail_extra(self, check: str, detail: str) -> None:
        """A failure that is not one of the checks (how the run went), reported on its own line."""
        self.results[check] = False
        self.out(result_line(check, False, detail))

    @property
    def passed(self) -> int:
        return sum(self.results.values())

    @property
    def total(self) -> int:
        """The expected checks, and any line the run's end added (``exit``, ``setup``)."""
        return len(set(self.expected) | set(self.results))

    @property
    def all_passed(self) -> bool:
        return (
            self.done
            and all(name in self.results for name in self.expected)
            and all(self.results.values())
        )

    def summary(self) -> str:
        return f"{self.passed} of {self.total} checks passed."


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


def _kill(proc: subprocess.Popen[bytes], tracked: dict[int, str] | None = None) -> None:
    """End the child and anything it started: its process group, and every descendant seen
    (``tracked``, pid -> start time, so that a reused pid is left alone), which may have left the
    group with ``setsid``."""
    for pid, started in (tracked or {}).items():
        if _start_time(pid) == started:
            with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - not POSIX
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


# --- the child's descendants ---------------------------------------------------------------------
#
# A process the learner's code starts in a session of its own (``start_new_session=True``,
# ``setsid``) leaves the child's process group, so ending the group does not end it. The parent
# finds such processes two ways: it scans ``/proc`` for the child's descendants while the child
# runs, and (Linux) it makes itself a "child subreaper" for the run, so that a descendant
# orphaned when its parent ends is handed to the checker rather than to init, where the checker
# finds it among its own children.


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3 onwards of ``/proc/PID/stat`` (state, ppid, ...); None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _start_time(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process in ``/proc`` (empty where there is no /proc)."""
    found: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            fields = _stat_fields(int(name))
            if fields and len(fields) > 1:
                found[int(name)] = int(fields[1])
    return found


def descendants(root: int) -> dict[int, str]:
    """Every living descendant of ``root``: pid -> start time (``/proc``, Linux)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in _parents().items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        started = _start_time(pid)
        if pid in found or started is None:
            continue
        found[pid] = started
        todo.extend(children.get(pid, []))
    return found


_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def _subreaper(on: bool | None) -> bool | None:
    """Set (``on`` True or False) this process's child-subreaper flag, returning what it was; with
    ``on=None`` only read it. None where ``prctl`` is not available (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
            return None
        if on is not None and libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
            return None
        return bool(was.value)
    except (OSError, AttributeError):
        return None


def _end_orphans(mine_before: set[int], tracked: dict[int, str]) -> None:
    """End what the run left: tracked descendants still alive, and processes handed to this one
    as their subreaper (children of this process that were not its children before the run),
    with their descendants; reap those that became its children."""
    for _ in range(5):
        me = os.getpid()
        adopted = {
            pid
            for pid, ppid in _parents().items()
            if ppid == me and pid not in mine_before and pid not in tracked
        }
        targets = {pid: s for pid, s in tracked.items() if _start_time(pid) == s}
        for pid in adopted:
            started = _start_time(pid)
            if started is not None:
                targets[pid] = started
                targets.update(descendants(pid))
        if not targets:
            return
        for pid, started in targets.items():
            if _start_time(pid) == started:
                with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
                    os.kill(pid, signal.SIGKILL)
        for pid in targets:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, 0)
        tracked = {}


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
    forged: int = 0  #: lines on the report pipe that did not carry the run's token


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
    # A per-run secret that the child reads from its stdin before any learner code runs and puts
    # in every event: a line that lacks it did not come from the checker (a learner's file that
    # writes to the report pipe), and is not believed.
    token = secrets.token_hex(16)
    mine_before = set(descendants(os.getpid()))
    was_subreaper = _subreaper(True)
    tracked: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="remat-check-", ignore_cleanup_errors=True) as tmp:
        output_path = Path(tmp) / "output.txt"
        read_fd, write_fd = os.pipe()
        command = [
            *(sys.executable, "-P", "-m", "examples.problems._runner"),
            *("--problem", problem, "--file", str(Path(file).resolve()), "--display", file),
            *("--seed", str(seed), "--report-fd", str(write_fd)),
            *("--memory-limit", str(memory_limit_mib if kernel_limit else 0)),
        ]
        # Read back through the same handle: the learner's code may remove the folder.
        with output_path.open("w+b") as output:
            try:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,),
                    env=_child_env(),
                    start_new_session=True,
                )
            finally:
                os.close(write_fd)
            try:
                _give_token(proc, token)
                offset = _watch(
                    proc, read_fd, tally, outcome, timeout, memory_limit_mib, token, tracked
                )
            finally:
                os.close(read_fd)
                tracked.update(descendants(proc.pid))
                _kill(proc, tracked)  # whatever it left running
                _end_orphans(mine_before, tracked)
                if was_subreaper is not None:
                    _subreaper(was_subreaper)
            outcome.returncode = proc.returncode
            output.flush()
            output.seek(0)
            data = output.read()
        if not tally.ready:  # all of it is the checker's own output
            offset = len(data)
        outcome.setup_output = data[:offset].decode("utf-8", "replace")
        outcome.output = data[offset:].decode("utf-8", "replace")
    return outcome


def _give_token(proc: subprocess.Popen[bytes], token: str) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.write(token.encode("ascii") + b"\n")
        proc.stdin.flush()
    with contextlib.suppress(BrokenPipeError, OSError):
        proc.stdin.close()


def _watch(
    proc: subprocess.Popen[bytes],
    read_fd: int,
    tally: Tally,
    outcome: Outcome,
    timeout: float,
    memory_limit_mib: int,
    token: str | None = None,
    tracked: dict[int, str] | None = None,
) -> int:
    """Read the child's events until it ends or a limit is hit; return the output offset.

    Events without ``token`` are not believed: they are counted in ``outcome.forged``. The
    child's descendants are recorded in ``tracked`` as they appear."""
    offset = 0
    next_scan = 0.0
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
                    if token is not None and event.pop("token", None) != token:
                        outcome.forged += 1
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
            if tracked is not None and time.monotonic() >= next_scan:
                tracked.update(descendants(proc.pid))
                next_scan = time.monotonic() + SCAN_S
            rss = _rss_mib(proc.pid)
            if rss is not None:
                outcome.peak_rss_mib = max(outcome.peak_rss_mib or 0.0, rss)
            if memory_limit_mib > 0 and rss is not None and rss > memory_limit_mib:
                outcome.stopped = "memory"
                _kill(proc, tracked)
                return offset
            if time.monotonic() > deadline:
                outcome.stopped = "time"
                _kill(proc, tracked)
                return offset
    finally:
        selector.close()


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None
