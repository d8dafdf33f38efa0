"""examples.tutorial.recursive: recursive checkpointing of a chain of sines, against its
formulas and float64 NumPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.tools.residuals import saved_residuals
from examples.tutorial import recursive as R


@pytest.mark.parametrize("depth", range(2, 129))
def test_residual_counts_follow_the_formulas(depth):
    x = jnp.float32(0.7)
    plain = saved_residuals(R.chain_compose([jnp.sin] * depth), x)
    recursive = saved_residuals(R.recursive_checkpoint([jnp.sin] * depth), x)
    assert len(plain) == R.plain_residual_formula(depth) == depth
    assert len(recursive) == R.recursive_residual_formula(depth)
    assert len(recursive) == int(np.floor(np.log2(depth))) + 1


def test_depth_sweep_costs_follow_the_formula():
    rows = R.depth_sweep((2, 4, 8, 16, 32, 64, 128))
    for r in rows:
        assert r.plain_sin_cos == 2 * r.depth
        assert r.recursive_sin_cos == R.recursive_sin_cos_formula(r.depth)
        assert r.recursive_residuals <= r.plain_residuals
    # memory grows like log D, cost like D log D
    assert rows[-1].recursive_residuals - rows[0].recursive_residuals == len(rows) - 1


@pytest.mark.parametrize("depth", [1, 2, 3, 8, 13, 16])
def test_recursive_scheme_computes_the_same_function_and_gradient(depth):
    x = jnp.float32(0.9)
    ref, d = np.float64(0.9), np.float64(1.0)
    for _ in range(depth):
        d *= np.cos(ref)
        ref = np.sin(ref)
    for fn in (R.chain_compose([jnp.sin] * depth), R.recursive_checkpoint([jnp.sin] * depth)):
        np.testing.assert_allclose(fn(x), ref, rtol=1e-5)
        np.testing.assert_allclose(jax.grad(fn)(x), d, rtol=1e-5)


def test_plot_depth_sweep_has_labels():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = R.plot_depth_sweep(R.depth_sweep((2, 4, 8)))
    mem, cost = fig.axes
    assert mem.get_xscale() == "log"
    assert mem.get_xlabel()
    assert cost.get_ylabel()
    assert {t.get_text() for t in mem.get_legend().get_texts()} == {
        "plain chain",
        "recursive checkpoint",
    }
    plt.close(fig)


def test_depth_table_lists_every_row():
    rows = R.depth_sweep((2, 4))
    table = R.depth_table(rows)
    assert table.column("D") == ["2", "4"]
    assert table.column("kept: recursive") == [str(r.recursive_residuals) for r in rows]
