"""The checker against right, wrong and hostile solutions (tests/solutions/) and bad input.

Learner files live in ``tests/solutions/PROBLEM/``; each one's docstring says what the checker
must make of it (``expect: pass`` or ``expect: fail CHECK ...``, and ``says: TEXT`` for a phrase
of its output). Where ``jax_remat3`` changes the verdict on some releases, the file says under
which behaviour (``expect under remat3 if BEHAVIOUR:``, one of :data:`REMAT3_BEHAVIOURS`), and
the test finds out whether this JAX behaves so, in the same run; otherwise the remat2 verdict
holds under remat3 too. Every file found
there is checked, in this process (the checks' logic, under ``remat2`` and ``jax_remat3``), so a
new problem's files are picked up without editing this module. The files in
``tests/solutions/hostile/`` end their process, hang, print, allocate or change JAX's
configuration: they run through the real child process, each with a test of its own.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import functools
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest
from remat_modes import REMAT_MODES

from examples.check import check_file, check_function, main
from examples.problems import load_problem, problem_names
from examples.problems._check_names import CHECK_NAMES
from examples.problems._checks import prepare, remat3_ignores_function_policies
from examples.problems._hints import policy_attribute
from examples.problems._kept import (
    describe_keys,
    parameter_values,
    residual_difference,
    residual_listing,
)
from examples.problems._process import Tally
from examples.problems._runner import exception_line, load_solution, run_checks, what_it_did
from examples.tools.jaxprs import (
    live_equations,
    remat3,
    remat3_available,
    remat_sites,
    traced_remat_sites,
)
from examples.tools.residuals import saved_residuals

DOTS = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
EVERYTHING = jax.checkpoint_policies.everything_saveable

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = Path(__file__).parent / "solutions"
HOSTILE = SOLUTIONS / "hostile"
SRC = str(ROOT / "src")
#: Checks in a run: load, the problem's own, config.
TOTAL = len(CHECK_NAMES) + 2
# Children check on the CPU: on a GPU, this test process already holds most of its memory.
CHILD_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
    "JAX_PLATFORMS": "cpu",
}


@pytest.fixture(autouse=True)
def _children_on_cpu(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")


# --- reading the learner files -------------------------------------------------------------------


def _remat3_keeps_only_names_under_everything_saveable() -> bool:
    """JAX 0.10.2's remat3 read ``everything_saveable`` as "keep the named values"; later
    releases keep every value, as remat2 does. Found by trying it."""
    with remat3(True):
        f = jax.checkpoint(lambda a: jnp.sum(jnp.sin(jnp.sin(a))), policy=EVERYTHING)
        return len(saved_residuals(f, jnp.ones(3)).excluding_arguments()) == 0


def _remat3_keeps_the_references_values_around_a_scan() -> bool:
    """Whether nnx.remat with a policy around an nnx.scan of blocks keeps, under remat3, exactly
    what the nnx_scan_remat reference keeps (jax 0.12: yes, by primitive, shape and dtype; 0.10.2:
    no, it also keeps the second layer's bias). Found by trying it on the problem's blocks."""
    from flax import nnx

    from examples.problems.nnx_scan_remat import make_blocks, nnx_scan_remat, page_input

    def step(h, block):
        return block(h)

    def outside(x):  # the blocks made inside, as a learner's function makes them
        scanned = nnx.scan(step, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        return jnp.sum(nnx.remat(scanned, policy=DOTS)(x, make_blocks(0, 4, 3)) ** 2)

    def reference(x):
        return jnp.sum(nnx_scan_remat(0, x, 4, 3) ** 2)

    x = page_input(batch=2, features=4)
    with remat3(True):
        extra, missing = residual_difference(
            residual_listing(outside, x), residual_listing(reference, x)
        )
    return not extra and not missing


def _remat3_turns_nothing_saveable_into_no_policy() -> bool:
    """Whether jax.checkpoint under remat3 records nothing_saveable as ``None``. Found by
    tracing it."""
    with remat3(True):
        f = jax.checkpoint(jnp.sin, policy=jax.checkpoint_policies.nothing_saveable)
        (site,) = traced_remat_sites(f, jnp.ones(3))
    return site.policy is None


def _remat3_keeps_no_tanh_that_a_function_policy_asks_for() -> bool:
    """Whether a function policy that saves every ``tanh`` output keeps none under remat3 (its
    rules ask a policy only about products and names, or, on some releases, never). Found by
    listing what it keeps."""

    def keep_tanh(prim, *_, **__):
        return prim.name == "tanh"

    with remat3(True):
        f = jax.checkpoint(lambda x: jnp.tanh(jnp.tanh(x)), policy=keep_tanh)
        kept = saved_residuals(f, jnp.ones(3)).excluding_arguments()
    return len(kept) == 0


def _remat3_checkpoint_keeps_dead_products() -> bool:
    """Whether JAX's dead-code elimination leaves a product inside a jax_remat3 checkpoint whose
    result nothing reads (jax 0.10.2 does; 0.12 removes it). Found by eliminating it."""

    def f(x):
        _, total = jax.checkpoint(lambda x: (x @ x, jnp.sum(x)))(x)
        return total

    with remat3(True):
        jaxpr = jax.make_jaxpr(f)(jnp.ones((2, 2))).jaxpr
    sites = remat_sites(live_equations(jaxpr))
    return bool(sites) and sites[0].products > 0


def _remat3_hides_a_nested_checkpoints_values() -> bool:
    """Whether the values inside a plain jax.checkpoint nested in one with a policy reach no
    policy under remat3 (jax 0.10.2: the outer dots policy keeps no product; 0.12 keeps them).
    Found by listing what it keeps."""

    def f(w, x):
        return jnp.sum(jnp.sin(x @ w))

    with remat3(True):
        g = jax.checkpoint(jax.checkpoint(f), policy=jax.checkpoint_policies.dots_saveable)
        kept = saved_residuals(g, jnp.ones((2, 2)), jnp.ones((2, 2))).excluding_arguments()
    return len(kept) == 0


#: What ``expect under remat3 if BEHAVIOUR:`` may name: the ways jax_remat3 has differed from
#: remat2 on some release, each detected on the installed one.
REMAT3_BEHAVIOURS = {
    "a checkpoint keeps dead products": _remat3_checkpoint_keeps_dead_products,
    "a function policy is not asked about tanh": (
        _remat3_keeps_no_tanh_that_a_function_policy_asks_for
    ),
    "it ignores function policies": remat3_ignores_function_policies,
    "everything_saveable keeps only names": _remat3_keeps_only_names_under_everything_saveable,
    "it turns nothing_saveable into no policy": _remat3_turns_nothing_saveable_into_no_policy,
    "a policy around a scan keeps the reference's values": (
        _remat3_keeps_the_references_values_around_a_scan
    ),
    "a nested checkpoint's values reach no policy": _remat3_hides_a_nested_checkpoints_values,
}
_KEYS = re.compile(r"^(expect|says)( under remat3 if (?P<behaviour>.+))?$")


def header(path: Path) -> dict[str, str]:
    """``key: value`` lines of the file's docstring."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    found = {}
    for line in doc.splitlines():
        key, sep, value = line.partition(":")
        match = _KEYS.match(key.strip()) if sep else None
        if match:
            behaviour = match["behaviour"]
            assert behaviour is None or behaviour in REMAT3_BEHAVIOURS, f"{path}: {behaviour}"
            found[key.strip()] = value.strip()
    return found


def expectation(path: Path, under_remat3: bool) -> tuple[set[str] | None, str | None]:
    """(the checks that must fail, None for a pass; a phrase the output must contain)."""
    h = header(path)
    expect, says = h["expect"], h.get("says")
    if under_remat3:
        for behaviour, detect in REMAT3_BEHAVIOURS.items():
            keys = (f"expect under remat3 if {behaviour}", f"says under remat3 if {behaviour}")
            if any(key in h for key in keys) and detect():
                expect = h.get(keys[0], expect)
                says = h.get(keys[1], says)
    if expect == "pass":
        return None, says
    verb, _, checks = expect.partition(" ")
    assert verb == "fail", f"{path}: expect: pass, or expect: fail CHECK..."
    assert checks, f"{path}: expect: fail names the checks that fail"
    return set(checks.split()), says


def learner_files() -> list[tuple[str, Path]]:
    return [
        (problem, path)
        for problem in problem_names()
        for path in sorted((SOLUTIONS / problem).glob("*.py"))
    ]


@functools.cache
def prepared_for(problem_name: str, seed: int, under_remat3: bool):
    """What the checker works out before it loads a solution (the cases, what the reference
    keeps), once per problem, seed and remat implementation: every learner file of a problem is
    checked against the same, as the command line checks one file against it."""
    problem = load_problem(problem_name)
    with remat3(True) if under_remat3 else contextlib.nullcontext():
        return prepare(problem, seed)


def check_here(problem_name: str, path: Path, under_remat3: bool = False, seed: int = 1):
    """Run the checks in this process; return (exit status, output lines)."""
    problem = load_problem(problem_name)
    lines: list[str] = []
    tally = Tally(lines.append)
    mode = remat3(True) if under_remat3 else contextlib.nullcontext()
    try:
        with mode:
            prepared = prepared_for(problem_name, seed, under_remat3)
            run_checks(problem, lambda: load_solution(path, problem.name), prepared, tally.event)
    finally:
        sys.modules.pop(f"_remat_check_solution_{problem.name}", None)
    lines.append(tally.summary())
    return (0 if tally.all_passed else 1), lines


def failed(lines: list[str]) -> set[str]:
    return {line.split()[1] for line in lines if line.startswith("FAIL")}


# --- every learner file, under both remat implementations ----------------------------------------


#: Every learner file under JAX's default remat in the quick run; under jax_remat3 too with
#: `--all` (CI).
LEARNER_MODES = [
    REMAT_MODES[0],
    pytest.param(
        *REMAT_MODES[1].values, id="remat3", marks=[*REMAT_MODES[1].marks, pytest.mark.slow]
    ),
]


@pytest.mark.parametrize("under_remat3", LEARNER_MODES)
@pytest.mark.parametrize(
    ("problem", "path"), learner_files(), ids=[f"{p}/{f.name}" for p, f in learner_files()]
)
def test_learner_files_get_the_verdict_they_declare(problem, path, under_remat3):
    must_fail, says = expectation(path, under_remat3)
    status, lines = check_here(problem, path, under_remat3)
    out = "\n".join(lines)
    if must_fail is None:
        assert status == 0, out
        assert f"{TOTAL} of {TOTAL} checks passed." in out
    else:
        assert status == 1, out
        assert failed(lines) == must_fail, out
    if says:
        assert says in out, out
    # One line per reported check: a reason never spills onto a second line.
    assert all(line.startswith(("PASS  ", "FAIL  ", "skipped    ")) for line in lines[:-1]), out
    assert not any("\n" in line for line in lines), out


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
@pytest.mark.parametrize("problem", problem_names())
def test_each_reference_module_passes_its_own_checks(problem, under_remat3):
    """The module the page's last cell checks, under both remat implementations: the policy and
    residuals checks included (under jax_remat3 the checkpoint is a call_hi_primitive whose
    RematTraced carries the policy, and residual listings name arguments otherwise)."""
    path = ROOT / "src" / "examples" / "problems" / f"{problem}.py"
    status, lines = check_here(problem, path, under_remat3)
    assert status == 0, "\n".join(lines)
    remat_line = next(line for line in lines if line.split()[1] == "remat")
    primitive = "call_hi_primitive" if under_remat3 else "remat2"
    assert f"a checkpoint ({primitive})" in remat_line
    assert any(line.startswith("PASS  policy") for line in lines)
    assert any(line.startswith("PASS  residuals") for line in lines)


def test_every_problem_has_learner_files_that_pass_and_fail():
    for problem in problem_names():
        verdicts = {
            expectation(path, False)[0] is None for path in (SOLUTIONS / problem).glob("*.py")
        }
        assert verdicts == {True, False}, (
            f"tests/solutions/{problem}/ needs a right and a wrong file"
        )
    assert set(p.name for p in SOLUTIONS.iterdir() if p.is_dir()) - {"__pycache__"} == {
        *problem_names(),
        "hostile",
    }


def test_a_raising_function_is_shown_at_the_learners_own_line():
    path = SOLUTIONS / "checkpoint_dot_policy" / "raises.py"
    _, lines = check_here("checkpoint_dot_policy", path)
    line = next(
        i for i, text in enumerate(path.read_text().splitlines(), 1) if "raise Value" in text
    )
    runs = next(text for text in lines if text.startswith("FAIL  runs"))
    assert f"{path}:{line} in helper during the runs check" in runs
    assert "examples/" not in runs


def test_linen_instance_error_names_the_learners_line():
    path = SOLUTIONS / "nn_checkpoint_forward" / "instance.py"
    _, lines = check_here("nn_checkpoint_forward", path)
    line = next(
        i for i, text in enumerate(path.read_text().splitlines(), 1) if "MLP(features" in text
    )
    assert any(f"instance.py:{line} in nn_checkpoint_forward" in text for text in lines)


def test_a_long_error_is_cut_keeping_the_sentence_that_names_the_argument():
    # JAX's tracer errors name the argument a traced value came from after 300 characters or
    # more; a learner who counted static_argnums wrong needs that sentence, not the start alone.
    opening = "Attempted boolean conversion of traced array with shape bool[]. " * 5
    named = "The error occurred while tracing the function f. This happened because it depends "
    named += "on the value of the argument activate. "
    err = TypeError(opening + named + "See the documentation for more. " * 3)
    line = exception_line(err)
    assert line.startswith("TypeError: Attempted boolean conversion")
    assert line.endswith("because it depends on the value of the argument activate.")
    assert " ... " in line
    assert len(line) < 320
    plain = exception_line(ValueError("x" * 400))  # nothing to keep: cut at 300 characters
    assert plain == "ValueError: " + "x" * 297 + "..."
    assert exception_line(ValueError("two\n  lines")) == "ValueError: two lines"


# --- the child process ---------------------------------------------------------------------------


def run_cli_here(tmp_path, name: str, timeout: float = 60.0):
    """The child-process check of a copy of a hostile file in ``tmp_path``; (status, lines)."""
    target = tmp_path / name
    shutil.copy(HOSTILE / name, target)
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    lines: list[str] = []
    status = check_file("checkpoint_dot_policy", str(target), 1, timeout, out=lines.append)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before, "the file was modified"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "something was written next to it"
    return status, lines


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "check", "reason"),
    [
        ("sys_exit.py", "runs", "your code called sys.exit(0) (SystemExit) at "),
        ("exit_at_load.py", "load", "your code called sys.exit(0) (SystemExit) at "),
        ("os_exit.py", "runs", "it exited with status 0, as os._exit() or a crash"),
        ("os_exit_at_load.py", "load", "(during the load check): it exited with status 3"),
        ("killed.py", "runs", "it was killed by SIGKILL"),
        ("keyboard_interrupt.py", "runs", "your code raised KeyboardInterrupt at "),
        ("config_x64.py", "config", "jax_enable_x64 False -> True"),
        ("config_precision.py", "config", "jax_default_matmul_precision None -> 'bfloat16'"),
        pytest.param(
            "config_remat3.py",
            "config",
            "jax_remat3 False -> True",
            marks=pytest.mark.skipif(not remat3_available(), reason="this JAX has no jax_remat3"),
        ),
    ],
)
def test_hostile_solutions_fail_with_one_line_naming_what_they_did(tmp_path, name, check, reason):
    status, lines = run_cli_here(tmp_path, name)
    out = "\n".join(lines)
    assert status == 1, out
    (line,) = [text for text in lines if text.startswith("FAIL")]
    assert line.startswith(f"FAIL  {check:<10} "), out
    assert reason in line, out
    assert lines[-1].endswith("checks passed."), out
    assert not lines[-1].startswith(f"{TOTAL} of"), out


@pytest.mark.slow
def test_events_forged_on_the_report_pipe_are_not_believed(tmp_path):
    """The file writes a PASS event for every check and "done" to the report pipe, then ends
    the process with status 0: its lines lack the run's token, so none counts."""
    status, lines = run_cli_here(tmp_path, "forges_report.py")
    out = "\n".join(lines)
    assert status == 1, out
    assert not any(text.startswith("PASS") for text in lines), out
    assert "FAIL  load       your code ended the process that ran it" in out
    (report,) = [text for text in lines if text.startswith("FAIL  report")]
    assert "without this run's token" in report, out
    assert lines[-1] == f"0 of {TOTAL + 1} checks passed.", out


@pytest.mark.slow
def test_a_late_exit_counts_in_the_summary(tmp_path):
    status, lines = run_cli_here(tmp_path, "late_exit.py")
    out = "\n".join(lines)
    assert status == 1, out
    (line,) = [text for text in lines if text.startswith("FAIL")]
    assert line.startswith("FAIL  exit       the checks finished, but then the process "), out
    assert lines[-1] == f"{TOTAL} of {TOTAL + 1} checks passed.", out


@pytest.mark.slow
def test_a_solution_that_removes_the_checkers_folder_gets_its_verdict(tmp_path, monkeypatch):
    """The right solution removes the temporary folder its output goes to; the checker reads
    the output through the handle it kept, and judges the solution, with no traceback."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    mine = tmp_path / "mine"
    mine.mkdir()
    status, lines = run_cli_here(mine, "removes_temp_folder.py")
    assert status == 0, lines
    assert lines[-1] == f"{TOTAL} of {TOTAL} checks passed."
    assert list(scratch.iterdir()) == []


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")
def test_processes_the_solution_starts_in_their_own_session_are_ended(
    tmp_path, tmp_path_factory, monkeypatch
):
    """One ``sleep`` in a session of its own, one double-forked and orphaned: both outlive the
    child's process group, and the checker ends both."""
    pids_file = tmp_path_factory.mktemp("pids") / "pids"
    monkeypatch.setenv("REMAT_CHECK_TEST_PIDS", str(pids_file))
    status, lines = run_cli_here(tmp_path, "starts_a_session.py")
    assert status == 0, lines
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in pids if _alive(pid)]
    for pid in left:  # not to leave them running if the test fails
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running: {left}"


def test_values_made_from_no_input_are_named_as_parameters():
    """A kept value is named by what computed it; one computed from none of the function's array
    arguments (a model's parameters, made inside) is named as a parameter, and JAX's internal
    call names say what they stand for."""

    def model(x):
        kernel = jnp.ones((3, 3)) * 0.5  # made from no input: a "mul" parameter
        return jnp.sin(x @ kernel) * 2.0

    found = parameter_values(model, jnp.ones(3))
    assert found[("mul", "f32[3,3]")] == 1
    assert ("sin", "f32[3]") not in found
    assert ("dot_general", "f32[3]") not in found
    keys = collections.Counter(
        {
            ("output", "f32[3,3]", "mul"): 2,
            ("output", "f32[3]", "custom_jvp_call"): 1,
            ("output", "f32[3]", "mul"): 1,
            ("argument", "f32[3]", None): 1,
        }
    )
    text = describe_keys(keys, found)
    assert "a parameter f32[3,3] (made by mul) ×2" in text
    assert "mul f32[3]" in text  # a value of another type, computed from the input
    assert "custom_jvp_call f32[3] (a function with its own derivative rule, such as relu)" in text
    assert "an input f32[3]" in text


def test_a_called_policys_hint_names_a_policy_this_jax_has():
    """Calling a policy with no arguments raises a TypeError that names its function (on jax
    0.5.0 dot_with_no_batch_dims_saveable, which jax.checkpoint_policies does not offer) or, where
    the policy is an object, its class's __call__ (jax 0.10.2's DotsSaveable, which holds both dots
    policies). The hint names attributes of jax.checkpoint_policies that hold that policy, never
    an alias, and the one called among them."""
    policies = jax.checkpoint_policies
    for attribute in ("dots_with_no_batch_dims_saveable", "checkpoint_dots", "dots_saveable"):
        with pytest.raises(TypeError) as raised:
            getattr(policies, attribute)()
        line = what_it_did(raised.value, None, "during the runs check")
        named = re.findall(r"jax\.checkpoint_policies\.(\w+)", line)
        assert named, line
        assert all(type(getattr(policies, n)) is type(getattr(policies, attribute)) for n in named)
        assert not any(n.startswith("checkpoint_") for n in named), line
        assert any(getattr(policies, n) is getattr(policies, attribute) for n in named), line
    err = TypeError(
        "dot_with_no_batch_dims_saveable() missing 1 required positional argument: 'prim'"
    )
    if not hasattr(policies, "dot_with_no_batch_dims_saveable"):
        # no attribute's function has that name on this release: the name is kept as it came
        assert "dot_with_no_batch_dims_saveable" in what_it_did(err, None, "")
    assert policy_attribute("no_such_policy") == "no_such_policy"


def test_a_checker_that_cannot_start_says_so_and_blames_no_solution(tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "no_such_platform")
    lines: list[str] = []
    shutil.copy(SOLUTIONS / "checkpoint_dot_policy" / "right.py", tmp_path / "right.py")
    status = check_file("checkpoint_dot_policy", str(tmp_path / "right.py"), 1, out=lines.append)
    assert status == 1
    (line,) = [text for text in lines if text.startswith("FAIL")]
    assert line.startswith("FAIL  setup      the checking process exited with status 1 before "), (
        line
    )
    assert "no_such_platform" in line
    assert not any(text.startswith("What your code printed") for text in lines)


@pytest.mark.slow
def test_a_hanging_solution_is_stopped_at_the_time_limit(tmp_path):
    status, lines = run_cli_here(tmp_path, "hangs.py", timeout=2)
    assert status == 1
    assert any(
        text.startswith("FAIL  runs") and "did not finish within 2 s (during the runs check" in text
        for text in lines
    ), lines


@pytest.mark.slow
@pytest.mark.parametrize("kernel_limit", [True, False], ids=["rlimit", "resident-memory-watch"])
def test_a_runaway_allocation_is_stopped_at_the_memory_limit(tmp_path, kernel_limit):
    """The solution allocates 3 GiB in 128 MiB steps; the limit is 1 GiB. With the child's
    RLIMIT_DATA the allocation raises MemoryError; without it, the parent sees the resident
    memory pass the limit and ends the child."""
    shutil.copy(HOSTILE / "memory_hog.py", tmp_path / "memory_hog.py")
    lines: list[str] = []
    status = check_file(
        "checkpoint_dot_policy",
        str(tmp_path / "memory_hog.py"),
        1,
        memory_limit_mib=1024,
        out=lines.append,
        kernel_limit=kernel_limit,
    )
    out = "\n".join(lines)
    assert status == 1, out
    (line,) = [text for text in lines if text.startswith("FAIL")]
    assert line.startswith("FAIL  runs"), out
    if kernel_limit:
        assert "MemoryError" in line, out
        assert "the checker allows 1024 MiB" in line, out
    else:
        assert "memory limit: the process running your code used more than 1024 MiB" in line


@pytest.mark.slow
def test_printed_output_is_shown_apart_and_cannot_fake_a_pass(tmp_path):
    status, lines = run_cli_here(tmp_path, "prints_fake_verdict.py")
    assert status == 1
    heading = lines.index(
        "What your code printed (stdout and stderr, while it was loaded and checked):"
    )
    printed = lines[heading + 1 : lines.index("", heading)]
    assert printed[:2] == [
        "| PASS  remat      a checkpoint surrounds 2 matrix products",
        f"| {TOTAL} of {TOTAL} checks passed.",
    ]
    assert "| computing the pipeline" in printed
    # The verdict's own lines come before the heading, the tally last.
    assert failed(lines[:heading]) == {"remat", "policy", "residuals"}
    assert lines[-1] == f"{TOTAL - 3} of {TOTAL} checks passed."


@pytest.mark.slow
def test_a_right_solution_that_prints_passes(tmp_path):
    status, lines = run_cli_here(tmp_path, "prints.py")
    assert status == 0, lines
    assert "| loading my solution" in lines
    assert any(text.startswith("| shapes: ") for text in lines)  # stderr, too
    assert lines[-1] == f"{TOTAL} of {TOTAL} checks passed."


@pytest.mark.slow
def test_command_line_runs_in_a_child_and_exits_with_the_status(tmp_path):
    target = tmp_path / "mine.py"
    shutil.copy(SOLUTIONS / "checkpoint_dot_policy" / "no_policy.py", target)
    done = subprocess.run(
        [sys.executable, "-m", "examples.check", "checkpoint_dot_policy", "mine.py", "--seed", "3"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=CHILD_ENV,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL  policy" in done.stdout
    assert "Checking mine.py for problem checkpoint_dot_policy; inputs from --seed 3" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py"]


@pytest.mark.slow
@pytest.mark.skipif(not remat3_available(), reason="this JAX has no jax_remat3")
def test_command_line_checks_under_jax_remat3_when_the_environment_asks(tmp_path):
    """JAX reads JAX_REMAT3 from the environment; the child inherits it and checks under
    jax_remat3. A policy wrapped in the learner's own function then fails on the releases whose
    remat3 recomputes everything instead of calling it (found in this run), and passes on those
    that call it, as remat2 does."""
    shutil.copy(SOLUTIONS / "checkpoint_dot_policy" / "policy_wrapper.py", tmp_path / "w.py")
    done = subprocess.run(
        [sys.executable, "-m", "examples.check", "checkpoint_dot_policy", "w.py", "--seed", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**CHILD_ENV, "JAX_REMAT3": "1"},
    )  # fmt: skip
    assert "a checkpoint (call_hi_primitive)" in done.stdout, done.stdout
    if remat3_ignores_function_policies():
        assert done.returncode == 1, done.stdout
        assert "under jax_remat3, JAX does not call a policy written as a function" in done.stdout
    else:
        assert done.returncode == 0, done.stdout
        assert f"{TOTAL} of {TOTAL} checks passed." in done.stdout


def test_the_checkers_parent_imports_no_jax():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, examples.check; print('jax' in sys.modules)"],
        capture_output=True, text=True, timeout=60, check=True, env=CHILD_ENV,
    )  # fmt: skip
    assert done.stdout.strip() == "False"


# --- usage ---------------------------------------------------------------------------------------


def test_usage_unknown_problem_bad_options_and_missing_file(capsys, tmp_path):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m examples.check PROBLEM FILE")
    assert all(name in out for name in problem_names())
    assert main(["remat_everything", "x.py"]) == 2
    out = capsys.readouterr().out
    assert "unknown problem 'remat_everything'" in out
    assert "nn_checkpoint_forward" in out
    assert main(["checkpoint_dot_policy", str(tmp_path / "nowhere.py")]) == 2
    assert "no such file: " in capsys.readouterr().out
    mine = tmp_path / "mine.py"
    mine.write_text("")
    assert main(["checkpoint_dot_policy", str(mine), "--timeout", "0"]) == 2
    assert "--timeout must be a positive number" in capsys.readouterr().out
    assert main(["checkpoint_dot_policy", str(mine), "--memory-limit", "-1"]) == 2
    assert "--memory-limit must be a positive number" in capsys.readouterr().out
    assert main(["checkpoint_dot_policy", str(mine), "--seed", "x"]) == 2


def test_syntax_error_names_the_line(tmp_path):
    target = tmp_path / "broken.py"
    target.write_text("import jax\n\n\ndef checkpoint_dot_policy(w1, w2, x)\n    return x\n")
    status, lines = check_here("checkpoint_dot_policy", target)
    assert status == 1
    assert any("has a syntax error on line 4" in line for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.py"]


# --- in a notebook -------------------------------------------------------------------------------


def test_check_function_runs_here_and_says_so(capsys):
    from examples.problems.checkpoint_dot_policy import checkpoint_dot_policy, without_checkpoint

    assert check_function("checkpoint_dot_policy", checkpoint_dot_policy, seed=0) == 0
    out = capsys.readouterr().out
    assert "in this process" in out
    assert "Not guarded" in out
    assert "PASS  load       given the function checkpoint_dot_policy" in out
    assert f"{TOTAL} of {TOTAL} checks passed." in out
    assert check_function("checkpoint_dot_policy", without_checkpoint, seed=0) == 1
    out = capsys.readouterr().out
    assert failed(out.splitlines()) == {"remat", "policy", "residuals"}


# --- the checker off the site: the wheel, installed, outside the repository ----------------------


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="needs uv to build and install the wheel")
def test_the_installed_wheel_checks_a_solution_outside_the_repository(tmp_path):
    """Build the wheel, install it (no dependencies) into a fresh venv that sees this test
    environment's site-packages (for JAX and Flax) through a .pth file, and check a file in a
    folder outside the repository with ``python -m examples.check`` and ``remat-check``."""
    uv = shutil.which("uv")
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [uv, "build", "--wheel", "-o", str(wheels), str(ROOT)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = wheels.glob("jax_remat_guide_examples-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    install = subprocess.run(
        [uv, "pip", "install", "--python", str(python), "--no-deps", "--offline", str(wheel)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # JAX, Flax and NumPy come from this test environment; the package only from the wheel.
    here = [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "zz-test-environment.pth").write_text("\n".join(here) + "\n")
    outside = tmp_path / "learner"
    outside.mkdir()
    shutil.copy(SOLUTIONS / "checkpoint_dot_policy" / "right.py", outside / "mine.py")
    env = {k: v for k, v in CHILD_ENV.items() if k != "PYTHONPATH"}
    where = subprocess.run(
        [str(python), "-c", "import examples; print(examples.__file__)"],
        capture_output=True, text=True, check=True, env=env, cwd=outside,
    ).stdout  # fmt: skip
    assert where.startswith(site), where
    for command in (
        [str(python), "-m", "examples.check", "checkpoint_dot_policy", "mine.py", "--seed", "2"],
        [str(env_dir / "bin" / "remat-check"), "checkpoint_dot_policy", "mine.py", "--seed", "2"],
    ):
        done = subprocess.run(
            command, cwd=outside, capture_output=True, text=True, timeout=300, check=False, env=env
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"{TOTAL} of {TOTAL} checks passed." in done.stdout
    assert sorted(p.name for p in outside.iterdir()) == ["mine.py"]
