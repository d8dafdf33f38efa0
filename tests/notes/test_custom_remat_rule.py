"""examples.notes.custom_remat_rule: ``jax.custom_vjp.defremat`` on ``sin`` under each setting of
``jax_custom_vjp3`` and ``jax_remat3``, each gradient against a float64 derivative."""

from __future__ import annotations

import jax
import pytest

from examples.notes import custom_remat_rule as n
from examples.notes.remat3_check import flag_available
from examples.tools import compat

pytestmark = pytest.mark.skipif(
    not flag_available(), reason=f"jax {jax.__version__} has no jax_remat3 flag"
)


def test_defremat_is_the_custom_rule_of_jax_0_12_and_needs_both_flags():
    # The page: jax 0.12 has custom_vjp.defremat; before it, sin_keeping_its_cosine says so.
    assert n.custom_rule_available() is (compat.jax_version() >= (0, 12))
    if not n.custom_rule_available():
        with pytest.raises(NotImplementedError, match=r"no jax\.custom_vjp\.defremat"):
            n.sin_keeping_its_cosine()
        (run,) = n.custom_rule_runs()  # the page's cell says so, and the notebook runs on
        assert run.kept.startswith(f"not run: jax {jax.__version__} has no jax.custom_vjp.defremat")
        return
    before = (jax.config.jax_custom_vjp3, jax.config.jax_remat3)
    runs = {r.setting: r for r in n.custom_rule_runs()}
    assert (jax.config.jax_custom_vjp3, jax.config.jax_remat3) == before  # both put back
    off, vjp3, both, plain = runs.values()
    assert off.gradient_error is None
    assert "requires the jax_custom_vjp3" in off.kept
    assert vjp3.kept == "1 × f32[3] argument x"  # the checkpoint ignores the rule
    assert both.kept == plain.kept == "2 × f32[3] output of cos"  # the rule decides
    for run in (vjp3, both, plain):
        assert run.gradient_error < 1e-6, run.setting


def test_a_release_without_defremat_gets_a_row_that_says_so(monkeypatch):
    # Faked on any release: the cell that shows what jax 0.12 adds says so on an older one.
    monkeypatch.setattr(n, "custom_rule_available", lambda: False)
    (run,) = n.custom_rule_runs()
    assert run.setting == f"jax {jax.__version__}"
    assert run.kept.startswith(f"not run: jax {jax.__version__} has no jax.custom_vjp.defremat")
    assert run.gradient_error is None
    table = n.custom_rule_table([run])
    assert table.column("gradient error (float64 reference)") == ["n/a"]
