"""The landing page's trade-off: the relations its prose states, on the page's own sizes."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from examples.landing import STRATEGIES, measure, table
from examples.models import scan_loss, stacked_tanh


@pytest.fixture(scope="module")
def page_rows():
    return measure()  # the sizes the page measures


def test_full_remat_costs_close_to_four_thirds(page_rows):
    plain, _, nothing = page_rows
    assert plain.strategy == "no checkpoint"
    assert plain.relative_flops == 1.0
    assert nothing.relative_flops == pytest.approx(4 / 3, abs=0.05)
    assert nothing.temp_bytes < plain.temp_bytes


def test_keeping_the_products_lands_in_between_at_almost_no_extra_cost(page_rows):
    plain, dots, nothing = page_rows
    assert nothing.temp_bytes < dots.temp_bytes < plain.temp_bytes
    assert 1.0 <= dots.relative_flops < 1.01


def test_checkpointing_uses_less_memory_and_more_flops_at_another_size():
    plain, dots, nothing = measure(depth=8, batch=32, width=64)
    assert plain.temp_bytes > nothing.temp_bytes
    assert nothing.temp_bytes < dots.temp_bytes
    # On a GPU XLA's buffer assignment can put the products' variant a few hundred bytes above
    # the plain gradient at this small size (seen on an H100, jax 0.11.2).
    assert dots.temp_bytes <= 1.02 * plain.temp_bytes
    assert nothing.flops > dots.flops >= plain.flops


def test_table_rows(page_rows):
    t = table(page_rows)
    assert t.column("strategy") == list(STRATEGIES)
    assert t.column("FLOPs vs. no checkpoint")[0] == "1.00×"


def test_gradients_do_not_depend_on_the_strategy():
    weights, x = stacked_tanh(depth=3, batch=4, width=8)
    # The loss against an independent float64 reference.
    h = np.asarray(x, np.float64)
    for w in np.asarray(weights, np.float64):
        h = np.tanh(h @ w)
    np.testing.assert_allclose(
        scan_loss(STRATEGIES["no checkpoint"])(weights, x), np.mean(h**2), rtol=1e-5
    )
    grads = [jax.grad(scan_loss(fn))(weights, x) for fn in STRATEGIES.values()]
    for other in grads[1:]:
        np.testing.assert_allclose(grads[0], other, rtol=1e-5, atol=1e-7)
