"""examples.notes.compile_time_eval: what Python holds for a computation on a static argument
while a checkpoint is traced, with and without ``jax.ensure_compile_time_eval``."""

from __future__ import annotations

import jax
import pytest

from examples.notes import compile_time_eval as m


def test_ensure_compile_time_eval_gives_a_concrete_value():
    n = 4
    expected = sum(k * k for k in range(n))
    seen = m.value_seen_while_tracing(n, compile_time_eval=True)
    assert seen.concrete
    assert str(expected) in seen.shown
    staged = m.value_seen_while_tracing(n, compile_time_eval=False)
    assert not staged.concrete
    assert jax.grad(m.scaled_by_sum_of_squares)(1.0, n) == expected
    assert jax.grad(m.scaled_by_sum_of_squares)(1.0, 5) == expected + 16


def test_int_on_a_staged_value_fails():
    with pytest.raises(
        jax.errors.ConcretizationTypeError, match="The problem arose with the `int`"
    ):
        jax.grad(m.scaled_by_sum_of_squares_staged)(1.0, 4)
