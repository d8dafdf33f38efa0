"""examples.tools.measure against hand-counted FLOPs and bytes."""

from __future__ import annotations

import time

import jax.numpy as jnp
import pytest

from examples.tools import measure
from examples.tools.measure import MIN_REPEATS, Timing, compiled_stats, time_call


def test_matmul_flops_and_argument_bytes():
    a = jnp.ones((64, 32), jnp.float32)
    b = jnp.ones((32, 16), jnp.float32)
    stats = compiled_stats(lambda a, b: a @ b, a, b)
    assert stats.flops == pytest.approx(2 * 64 * 32 * 16, rel=0.01)
    assert stats.argument_bytes == 4 * (64 * 32 + 32 * 16)
    assert stats.output_bytes == 4 * 64 * 16


def test_time_call_counts_and_orders():
    timing = time_call(lambda x: x + 1, jnp.ones(8), repeats=9, warmup=1)
    assert timing.repeats == 9
    assert 0 < timing.min_s <= timing.median_s <= timing.max_s


@pytest.mark.parametrize("repeats", [0, 1, MIN_REPEATS - 1])
def test_time_call_needs_enough_repeats_for_a_spread(repeats):
    with pytest.raises(ValueError, match=f"at least {MIN_REPEATS}"):
        time_call(lambda: None, repeats=repeats)


def _timing(low, mid, high):
    return Timing(median_s=mid, min_s=low, max_s=high, repeats=MIN_REPEATS)


def test_compare_claims_an_order_only_without_overlap():
    fast, slow = _timing(1.0, 1.1, 1.2), _timing(1.3, 1.4, 1.5)
    assert fast.compare(slow) == "faster"
    assert slow.compare(fast) == "slower"
    # Medians far apart, but the slowest fast call is slower than the fastest slow call.
    noisy = _timing(1.0, 1.05, 1.35)
    assert noisy.compare(slow) == "within the noise"
    assert slow.compare(noisy) == "within the noise"


def test_ranges_that_nearly_touch_are_within_the_noise():
    # 262-279 ms against 279.4-305 ms: apart by 0.4 ms, which three printed figures hide; an
    # order needs a gap of SEPARATION (2%) of the faster range's slowest call.
    fast, close = _timing(0.262, 0.270, 0.279), _timing(0.2794, 0.29, 0.305)
    assert fast.compare(close) == close.compare(fast) == "within the noise"
    apart = _timing(0.279 * 1.021, 0.29, 0.305)
    assert fast.compare(apart) == "faster"
    assert apart.compare(fast) == "slower"


def test_timing_prints_median_and_spread():
    text = str(_timing(0.00102, 0.0011, 0.00131))
    assert text == "1.1 ms (median of 7; 1.02–1.31 ms)"


def test_interleaved_timing_gives_every_step_a_median_and_a_spread():
    calls = []

    def step(label):
        return lambda x: calls.append(label) or x

    times = measure.time_interleaved({"a": step("a"), "b": step("b")}, jnp.ones(2), repeats=7)
    assert set(times) == {"a", "b"}
    for t in times.values():
        assert t.repeats == 7
        assert t.min_s <= t.median_s <= t.max_s
    # Two warm-up calls of each, then seven rounds in turns, the order rotated each round.
    rounds = [["a", "b"] if r % 2 == 0 else ["b", "a"] for r in range(7)]
    assert calls == ["a", "a", "b", "b", *(label for r in rounds for label in r)]
    with pytest.raises(ValueError, match="at least"):
        measure.time_interleaved({"a": step("a")}, jnp.ones(2), repeats=2)


def test_before_each_runs_before_every_timed_call_and_outside_its_time():
    calls = []

    def slow_setup():
        calls.append("setup")
        time.sleep(0.02)

    def step(x):
        calls.append("step")
        return x

    times = measure.time_interleaved(
        {"a": step}, jnp.ones(2), repeats=7, warmup=1, before_each=slow_setup
    )
    assert calls == ["step", *["setup", "step"] * 7]  # not before the warm-up call
    assert times["a"].max_s < 0.02  # the setup's sleep is not in the time


def test_step_times_are_taken_in_interleaved_rounds():
    """Each round calls every function once, in a rotated order, after the warm-up calls."""
    from examples.tools.measure import time_interleaved

    calls = []

    def recorder(name):
        def fn(x):
            calls.append(name)
            return x

        return fn

    fns = {n: recorder(n) for n in ("a", "b", "c")}
    timings = time_interleaved(fns, jnp.ones(2), repeats=7, warmup=1)
    assert calls[:3] == ["a", "b", "c"]  # the warm-up
    rounds = [calls[3 + 3 * i : 6 + 3 * i] for i in range(7)]
    assert rounds[0] == ["a", "b", "c"]
    assert rounds[1] == ["b", "c", "a"]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)
    assert all(t.repeats == 7 and t.min_s <= t.median_s <= t.max_s for t in timings.values())
