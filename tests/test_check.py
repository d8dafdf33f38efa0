"""The checker against right and wrong solutions (tests/solutions/) and bad input.

main() is called in-process (a subprocess would pay JAX's import each time); one test runs the
real command line.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from examples.check import main

SOLUTIONS = Path(__file__).parent / "solutions"
SRC = str(Path(__file__).resolve().parents[1] / "src")
# The child checks on the CPU: on a GPU, this test process already holds most of its memory.
CHILD_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
    "JAX_PLATFORMS": "cpu",
}


def _check(capsys, problem, name, *extra, tmp_path=None):
    """Run the checker on a copy of a fixture in tmp_path; return (status, output)."""
    source = SOLUTIONS / name
    target = tmp_path / name
    shutil.copy(source, target)
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    status = main([problem, str(target), "--seed", "1", *extra])
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before, "the file was modified"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "something was written next to it"
    return status, capsys.readouterr().out


def _line_of(path, text):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _lines(out):
    return {line.split()[1]: line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))}


@pytest.mark.parametrize(
    ("problem", "name"),
    [
        ("checkpoint_dot_policy", "dot_policy_right.py"),
        ("checkpoint_dot_policy", "dot_policy_jitted.py"),
        ("checkpoint_dot_policy", "dot_policy_reference.py"),
        ("nn_checkpoint_forward", "linen_right.py"),
        ("nnx_remat_policy", "nnx_right.py"),
    ],
)
def test_accepts_right_solutions(capsys, tmp_path, problem, name):
    status, out = _check(capsys, problem, name, tmp_path=tmp_path)
    assert status == 0, out
    assert "10 of 10 checks passed." in out
    assert "FAIL" not in out


@pytest.mark.parametrize(
    ("problem", "name", "failing", "message"),
    [
        ("checkpoint_dot_policy", "dot_policy_no_policy.py", {"policy", "residuals"},
         "found none (JAX's default: keep nothing)"),
        ("checkpoint_dot_policy", "dot_policy_no_checkpoint.py", {"remat", "policy", "residuals"},
         "no checkpoint in the traced function"),
        ("checkpoint_dot_policy", "dot_policy_dots_saveable.py", {"policy"},
         "found dots_saveable"),
        ("checkpoint_dot_policy", "dot_policy_wrong_formula.py", {"value", "gradient"},
         "differs from the float64 reference"),
        ("nn_checkpoint_forward", "linen_no_checkpoint.py", {"remat", "policy", "residuals"},
         "no checkpoint in the traced function"),
        ("nn_checkpoint_forward", "linen_layers_swapped.py", {"value", "gradient"},
         "differs from the float64 reference"),
        ("nnx_remat_policy", "nnx_nothing_saveable.py", {"policy", "residuals"},
         "found nothing_saveable"),
        ("nnx_remat_policy", "nnx_no_remat.py", {"remat", "policy", "residuals"},
         "no checkpoint in the traced function"),
    ],
)  # fmt: skip
def test_rejects_wrong_solutions_naming_the_failing_checks(
    capsys, tmp_path, problem, name, failing, message
):
    status, out = _check(capsys, problem, name, tmp_path=tmp_path)
    assert status == 1
    lines = _lines(out)
    assert {check for check, line in lines.items() if line.startswith("FAIL")} == failing, out
    assert message in out
    # The value-only grading of the seeds would have passed these two:
    if name in {"dot_policy_no_policy.py", "nnx_no_remat.py"}:
        assert lines["value"].startswith("PASS")


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("missing_function.py", 1,
         "defines no function named checkpoint_dot_policy (it defines: checkpoint_dots)"),
        ("raises.py", 1,
         "your function raised ValueError: this learner gave up at "),
        ("wrong_shape.py", 1, "FAIL  shape      expected shape () for N=1, d=3, got (3,)"),
        ("wrong_dtype.py", 1, "expected float32 (the inputs' dtype), got float16"),
        ("nan.py", 1, "the output contains NaN"),
    ],
)  # fmt: skip
def test_bad_solutions_get_one_clear_reason(capsys, tmp_path, name, status, message):
    got, out = _check(capsys, "checkpoint_dot_policy", name, tmp_path=tmp_path)
    assert got == status
    assert message in out, out


def test_a_raising_function_is_shown_at_the_learners_own_line(capsys, tmp_path):
    _, out = _check(capsys, "checkpoint_dot_policy", "raises.py", tmp_path=tmp_path)
    line = _line_of(SOLUTIONS / "raises.py", "raise ValueError")
    assert f"{tmp_path / 'raises.py'}:{line} in helper" in out
    assert "examples/" not in out.split("FAIL")[1].splitlines()[0]


def test_linen_instance_error_is_reported_with_flax_message(capsys, tmp_path):
    status, out = _check(capsys, "nn_checkpoint_forward", "linen_instance.py", tmp_path=tmp_path)
    assert status == 1
    assert "TransformTargetError: Linen transformations must be applied to Modules classes" in out
    line = _line_of(SOLUTIONS / "linen_instance.py", "nn.checkpoint(MLP(")
    assert f"linen_instance.py:{line} in nn_checkpoint_forward" in out


def test_syntax_error_names_the_line(capsys, tmp_path):
    target = tmp_path / "broken.py"
    target.write_text("import jax\n\n\ndef checkpoint_dot_policy(w1, w2, x)\n    return x\n")
    assert main(["checkpoint_dot_policy", str(target)]) == 1
    assert "has a syntax error on line 4" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.py"]


def test_a_hanging_solution_hits_the_time_limit(capsys, tmp_path):
    status, out = _check(capsys, "checkpoint_dot_policy", "hangs.py", "--timeout", "2",
                         tmp_path=tmp_path)  # fmt: skip
    assert status == 1
    assert "the solution did not finish within 2 s" in out


def test_usage_unknown_problem_and_missing_file(capsys, tmp_path):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m examples.check PROBLEM FILE")
    assert all(p in out for p in ("checkpoint_dot_policy", "nnx_remat_policy"))
    assert main(["remat_everything", "x.py"]) == 2
    out = capsys.readouterr().out
    assert "unknown problem 'remat_everything'" in out
    assert "nn_checkpoint_forward" in out
    assert main(["checkpoint_dot_policy", str(tmp_path / "nowhere.py")]) == 2
    assert "no such file: " in capsys.readouterr().out


def test_command_line_runs_and_exits_with_the_status(tmp_path):
    target = tmp_path / "mine.py"
    shutil.copy(SOLUTIONS / "dot_policy_no_policy.py", target)
    done = subprocess.run(
        [sys.executable, "-m", "examples.check", "checkpoint_dot_policy", "mine.py", "--seed", "3"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        env=CHILD_ENV,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL  policy" in done.stdout
    assert "Checking mine.py for problem checkpoint_dot_policy; inputs from --seed 3" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py"]
