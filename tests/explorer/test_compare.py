"""examples.explorer.compare: policies measured on a user's function; bad functions refused."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from examples import explorer as e


def _user_loss(w, x):
    return jnp.mean(jnp.tanh(jnp.tanh(x @ w) @ w) ** 2)


def test_compare_policies_on_a_user_function():
    w, x = jnp.ones((16, 16)) / 16, jnp.ones((8, 16))
    table = e.compare_policies(
        _user_loss, w, x, policies=[e.NO_REMAT, "nothing_saveable"], repeats=7
    )
    rows = {r["policy"]: r for r in table.rows}
    # Without remat the backward pass keeps both tanh outputs and the inner product (8×16 each).
    assert rows[e.NO_REMAT]["residual_bytes_per_layer"] >= 2 * 8 * 16 * 4
    assert rows["nothing_saveable"]["residual_bytes_per_layer"] == 0
    assert "| nothing_saveable |" in table._repr_markdown_()
    assert "| nothing_saveable |" in str(table)
    # Timed with a spread: the table shows it, and verdicts can be given.
    assert all(r.timing is not None and r.timing.repeats == 7 for r in table.results)
    assert e.timing_verdicts(table.results) is not None


def _scanned_loss(weights, x, policy=None):
    def layer(h, w):
        return h + jnp.tanh(h @ w), None

    body = layer if policy is None else jax.checkpoint(layer, policy=policy)
    h, _ = jax.lax.scan(body, x, weights)
    return jnp.mean(h**2)


def test_compare_policies_passes_the_policy_to_functions_that_take_one():
    weights, x = jnp.ones((6, 32, 32)) / 32, jnp.ones((64, 32))
    table = e.compare_policies(
        _scanned_loss, weights, x, policies=[e.NO_REMAT, "nothing_saveable"], repeats=7
    )
    rows = {r.policy: r for r in table.results}
    assert rows["nothing_saveable"].temp_bytes < rows[e.NO_REMAT].temp_bytes
    assert rows["nothing_saveable"].flops > rows[e.NO_REMAT].flops


def _loops(x):
    return jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1].sum()


def test_compare_policies_rejects_bad_functions():
    with pytest.raises(TypeError, match="at least one floating-point array"):
        e.compare_policies(lambda n: n * 2.0, 3)
    with pytest.raises(TypeError, match="no arguments"):
        e.compare_policies(lambda: jnp.float32(1.0))
    with pytest.raises(ValueError, match="returns a scalar"):
        e.compare_policies(lambda x: x * 2.0, jnp.ones(3))
    with pytest.raises(TypeError, match="cannot be differentiated"):
        e.compare_policies(lambda x: jnp.sum(x > 0), jnp.ones(3))
    with pytest.raises(ValueError, match=r"jax\.grad cannot differentiate '_loops'"):
        e.compare_policies(_loops, jnp.ones(3))
    with pytest.raises(KeyError, match="unknown policies"):
        e.compare_policies(_user_loss, jnp.ones((2, 2)), jnp.ones((2, 2)), policies=["nope"])
