"""examples.notes.remat3_check: the one-call comparison of jax_remat3 off and on."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from examples.notes import remat3 as n
from examples.notes.remat3_check import (
    compare_remat3,
    flag_available,
    policy_kind,
    remat3_flag,
    tolerance,
)

pytestmark = pytest.mark.skipif(
    not flag_available(), reason=f"jax {jax.__version__} has no jax_remat3 flag"
)
CP = jax.checkpoint_policies


class Stop(BaseException):
    """Not an Exception: passes through the check's capture, like KeyboardInterrupt."""


def _listing_only() -> list[str]:
    """The difference line for argument names, on releases whose listings rename them."""
    if n.argument_names(True) == n.argument_names(False):
        return []
    return [
        "arguments are listed under other names with the flag on (by position, not by "
        "parameter name): only the listing differs."
    ]


@pytest.mark.parametrize("start", [False, True])
def test_flag_restored_when_the_function_raises(start):
    def raises_under_flag(W, x):
        if jax.config.jax_remat3:
            raise ValueError("only with the flag")
        return n.two_layers(W, x)

    with remat3_flag(start):
        report = compare_remat3(raises_under_flag, *n.two_layers_inputs(), policy=None)
        assert jax.config.jax_remat3 is start
    assert report.on.error == "ValueError: only with the flag"
    assert report.off.error is None
    assert report.gradients_agree is None
    assert any("with the flag on only" in d for d in report.differences)

    def stops(W, x):
        raise Stop

    with remat3_flag(start):
        with pytest.raises(Stop):
            compare_remat3(stops, *n.two_layers_inputs())
        assert jax.config.jax_remat3 is start
    assert jax.config.jax_remat3 is False


def test_known_kind_shows_no_difference():
    report = compare_remat3(n.two_layers, *n.two_layers_inputs(), policy=CP.dots_saveable)
    assert report.policy == "dots_saveable"
    assert report.gradients_agree is True
    # Besides the listing, a release may compile the two gradients differently (jax 0.10.2:
    # 172 against 160 FLOPs); the report says so in a line of its own.
    compiled = [d for d in report.differences if d.startswith("the compiled gradient changes")]
    assert [d for d in report.differences if d not in compiled] == _listing_only()
    assert report.off.kept() == report.on.kept() == "dot_general f32[4] ×2"
    assert set(report.off.implementations) == {"remat2"}
    assert set(report.on.implementations) == {"call_hi_primitive"}
    text = report._repr_markdown_()
    assert "| computed and kept | dot_general f32[4] ×2 | dot_general f32[4] ×2 |" in text
    assert ("no difference" in repr(report)) is (not list(report.differences))


def test_custom_function_policy_reports_what_the_guide_measures():
    W, x = n.two_layers_inputs()
    report = compare_remat3(n.two_layers, W, x, policy=n.keep_everything, argnums=(0, 1))
    assert report.policy == "custom function"
    assert report.gradients_agree is True
    assert len(report.on.computed) == len(n.residuals_of(n.keep_everything, True)) - 2
    assert len(report.off.computed) == 3
    cos_line = [d for d in report.differences if d.startswith("cos f32[4]")]
    assert cos_line
    assert "no jax_remat3 rule" in cos_line[0]


def test_gradients_that_differ_are_reported():
    def flag_dependent(x):
        return jnp.sum(jnp.sin(x) * (2.0 if jax.config.jax_remat3 else 1.0))

    report = compare_remat3(flag_dependent, jnp.arange(3.0), policy=None)
    assert report.gradients_agree is False
    assert report.max_difference > 0.5
    assert any("gradients differ" in d for d in report.differences)
    assert "DIFFER" in repr(report)


def test_checkpoint_wrapped_before_the_flag():
    wrapped = jax.checkpoint(n.two_layers)  # wrapped now, with the flag off
    report = compare_remat3(wrapped, *n.two_layers_inputs())
    stayed = any("stayed `remat2`" in d for d in report.differences)
    assert stayed is (not n.flag_read_at_call_time())
    assert ("call_hi_primitive" in report.on.implementations) is n.flag_read_at_call_time()


def test_function_without_checkpoint():
    report = compare_remat3(n.two_layers, *n.two_layers_inputs())
    assert report.off.implementations == report.on.implementations == ()
    assert any("no jax.checkpoint" in d for d in report.differences)


def test_tolerance_fits_the_dtype():
    assert tolerance(jnp.float32) == pytest.approx(1e-5)
    assert tolerance(jnp.bfloat16) > tolerance(jnp.float16) > tolerance(jnp.float32)
    assert tolerance(jnp.float64) < 1e-12


def test_policy_kinds():
    assert policy_kind(None) == "none (keep nothing)"
    assert policy_kind(CP.everything_saveable) == "everything_saveable"
    kind = policy_kind(CP.save_only_these_names("a"))
    assert kind in ("save_only_these_names", "SaveOnlyTheseNames")
    assert policy_kind(n.keep_everything) == "custom function"


def test_runs_outside_the_repository(tmp_path):
    code = textwrap.dedent(
        """
        import jax, jax.numpy as jnp
        from examples.notes.remat3_check import compare_remat3
        f = lambda x: jnp.sum(jnp.sin(jnp.sin(x)))
        r = compare_remat3(f, jnp.arange(3.0), policy=None)
        assert r.gradients_agree and not jax.config.jax_remat3
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["scan_transformer_case", "linen_case", "nnx_case"])
def test_the_guides_models(case):
    f, args = getattr(n, case)(CP.save_only_these_names("mlp_hidden", "mlp_pre"))
    report = compare_remat3(f, *args)
    assert report.gradients_agree is True
    assert "call_hi_primitive" in report.on.implementations
    assert set(report.off.implementations) == {"remat2"}
    assert report.off.residuals.nbytes == report.on.residuals.nbytes
    prevent_cse_dropped = n.barriers(False, True) != 0  # this release ignores prevent_cse=False
    for line in report.differences:
        assert (
            line in _listing_only()
            or (prevent_cse_dropped and "optimization barrier" in line)
            or line.startswith("the compiled gradient changes: ")
        )
    assert jax.config.jax_remat3 is False


def test_the_report_shows_the_compiled_gradient_as_xla_measures_it():
    from examples.tools.measure import compiled_stats

    W, x = n.two_layers_inputs()
    report = compare_remat3(n.two_layers, W, x, policy=n.keep_everything, argnums=(0, 1))
    for side in (report.off, report.on):
        with remat3_flag(side.flag):
            f = jax.checkpoint(n.two_layers, policy=n.keep_everything)
            stats = compiled_stats(jax.grad(f, argnums=(0, 1)), W, x)
        assert (side.temp_bytes, side.flops) == (stats.temp_bytes, stats.flops)
    row = dict((label, (off, on)) for label, off, on in report.rows())
    assert "compiled gradient: temp, FLOPs" in row
    changed = (report.off.temp_bytes, report.off.flops) != (report.on.temp_bytes, report.on.flops)
    assert any(d.startswith("the compiled gradient changes") for d in report.differences) is changed
