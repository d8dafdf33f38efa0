"""Measurements shared by the pages: what XLA compiles, and how long a call takes.

Every figure the site shows about memory, FLOPs or time comes from these functions, run when
the page is built, on whatever backend builds it.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax


@dataclasses.dataclass(frozen=True)
class CompiledStats:
    """What XLA reports for one compiled function (bytes and FLOPs; ``None`` if not reported)."""

    temp_bytes: int
    argument_bytes: int
    output_bytes: int
    peak_bytes: int | None
    flops: float | None
    host_temp_bytes: int | None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def compiled_stats(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> CompiledStats:
    """Compile ``jax.jit(fn)`` for these arguments and read XLA's memory and cost analyses."""
    compiled = jax.jit(fn).lower(*args, **kwargs).compile()
    memory = compiled.memory_analysis()
    if memory is None:
        raise RuntimeError(
            f"the {jax.default_backend()} backend reports no memory analysis for compiled code"
        )
    cost = compiled.cost_analysis()
    if isinstance(cost, list):  # older jaxlibs return one dict per device
        cost = cost[0] if cost else None
    flops = None if not cost or "flops" not in cost else float(cost["flops"])
    return CompiledStats(
        temp_bytes=int(memory.temp_size_in_bytes),
        argument_bytes=int(memory.argument_size_in_bytes),
        output_bytes=int(memory.output_size_in_bytes),
        peak_bytes=_int_or_none(getattr(memory, "peak_memory_in_bytes", None)),
        flops=flops,
        host_temp_bytes=_int_or_none(getattr(memory, "host_temp_size_in_bytes", None)),
    )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call: the median over ``repeats`` timed calls, after warm-up."""

    median_s: float
    min_s: float
    repeats: int

    def __str__(self) -> str:
        return f"{format_seconds(self.median_s)} (median of {self.repeats})"


def time_call(
    fn: Callable[..., Any], *args: Any, repeats: int = 20, warmup: int = 2, **kwargs: Any
) -> Timing:
    """Time ``fn(*args, **kwargs)``, blocking until its results are ready.

    The warm-up calls absorb compilation and caching; the median is robust to the odd slow call
    on a busy machine.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    for _ in range(warmup):
        jax.block_until_ready(fn(*args, **kwargs))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args, **kwargs))
        samples.append(time.perf_counter() - start)
    return Timing(statistics.median(samples), min(samples), repeats)


def format_seconds(seconds: float) -> str:
    """``0.00042`` -> ``"420 µs"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"
