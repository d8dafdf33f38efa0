"""examples.measure against hand-counted FLOPs and bytes."""

from __future__ import annotations

import jax.numpy as jnp
import pytest

from examples.measure import compiled_stats, format_seconds, time_call


def test_matmul_flops_and_argument_bytes():
    a = jnp.ones((64, 32), jnp.float32)
    b = jnp.ones((32, 16), jnp.float32)
    stats = compiled_stats(lambda a, b: a @ b, a, b)
    assert stats.flops == pytest.approx(2 * 64 * 32 * 16, rel=0.01)
    assert stats.argument_bytes == 4 * (64 * 32 + 32 * 16)
    assert stats.output_bytes == 4 * 64 * 16


def test_time_call_counts_and_orders():
    timing = time_call(lambda x: x + 1, jnp.ones(8), repeats=5, warmup=1)
    assert timing.repeats == 5
    assert 0 < timing.min_s <= timing.median_s


def test_time_call_rejects_zero_repeats():
    with pytest.raises(ValueError, match="at least 1"):
        time_call(lambda: None, repeats=0)


@pytest.mark.parametrize(
    ("s", "text"), [(2.5, "2.5 s"), (0.00042, "420 µs"), (0.0123, "12.3 ms"), (5e-8, "50 ns")]
)
def test_format_seconds(s, text):
    assert format_seconds(s) == text
