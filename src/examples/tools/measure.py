"""Measurements shared by the pages: what XLA compiles, and how long a call takes.

Every figure the site shows about memory, FLOPs or time comes from these functions, run when
the page is built, on whatever backend builds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax

from examples.tools import compat
from examples.tools.display import format_range, format_seconds

#: The least gap between two ranges of calls, as a share of the slower call of the faster range,
#: that :meth:`Timing.compare` counts as an order (2%).
SEPARATION = 0.02


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


#: Compiler options for a program compiled only to read what XLA planned for it
#: (``memory_analysis()``, ``cost_analysis()``, the optimized HLO) and never run: LLVM's
#: optimisation of the machine code off. XLA's own passes, which make the plan (remat, fusion,
#: scheduling, buffer assignment), run as at the default level, and give the same figures
#: (tests/test_codegen.py compares the two on every policy, and :func:`compiled_stats` against a
#: default compile); only the machine code, which nobody runs, is made with less effort: a
#: training step of the Flax guides compiles in about half the time.
ANALYSIS_OPTIONS = {"xla_backend_optimization_level": 0}


def compile_for_analysis(lowered: Any) -> Any:
    """``lowered.compile()`` for reading XLA's plan only (:data:`ANALYSIS_OPTIONS`): do not run
    or time the executable it returns; compile with ``lowered.compile()`` what you run."""
    return lowered.compile(compiler_options=ANALYSIS_OPTIONS)


def compiled_stats(
    fn: Callable[..., Any], *args: Any, runs: bool = False, **kwargs: Any
) -> CompiledStats:
    """Compile ``jax.jit(fn)`` for these arguments and read XLA's memory and cost analyses.

    Compiled for reading only (:func:`compile_for_analysis`), unless ``runs``: say so where the
    caller then runs (times) ``jax.jit(fn)`` on the same arguments. It is then compiled as it will
    run, and with JAX's persistent compilation cache on (the site's build has it) the run reads
    this compile instead of compiling the step a second time.
    """
    lowered = jax.jit(fn).lower(*args, **kwargs)
    return stats_of(lowered.compile() if runs else compile_for_analysis(lowered))


def stats_of(compiled: Any) -> CompiledStats:
    """XLA's memory and cost analyses of a compiled executable (``jax.stages.Compiled``)."""
    memory = compiled.memory_analysis()
    if memory is None:
        raise RuntimeError(
            f"the {jax.default_backend()} backend reports no memory analysis for compiled code"
        )
    cost = compat.cost_analysis(compiled)
    flops = None if not cost or "flops" not in cost else float(cost["flops"])
    return CompiledStats(
        temp_bytes=int(memory.temp_size_in_bytes),
        argument_bytes=int(memory.argument_size_in_bytes),
        output_bytes=int(memory.output_size_in_bytes),
        # Reported by newer jaxlibs only (None elsewhere).
        peak_bytes=compat.memory_field(memory, "peak_memory_in_bytes"),
        flops=flops,
        host_temp_bytes=compat.memory_field(memory, "host_temp_size_in_bytes"),
    )


#: The fewest timed calls a figure on the site may rest on.
MIN_REPEATS = 7


@dataclasses.dataclass(frozen=True)
class Timing:
    """Seconds per call over ``repeats`` timed calls after warm-up: median and spread.

    On a shared machine one call can take twice as long as the next, so a single figure says
    little; the site shows the median with the fastest and slowest call, and calls two timings
    different only where those ranges do not overlap (:meth:`compare`).
    """

    median_s: float
    min_s: float
    max_s: float
    repeats: int

    @property
    def spread(self) -> str:
        """``"1.02–1.31 ms"``: the fastest and the slowest call."""
        return format_range(self.min_s, self.max_s)

    def __str__(self) -> str:
        return f"{format_seconds(self.median_s)} (median of {self.repeats}; {self.spread})"

    def overlaps(self, other: Timing) -> bool:
        """Whether the two ranges of calls (fastest to slowest) overlap, or come closer than
        :data:`SEPARATION` of the faster one's slowest call: ranges printed to three figures
        can then touch, and one noisy call would close the gap."""
        first, second = sorted((self, other), key=lambda t: t.min_s)
        return second.min_s <= first.max_s * (1 + SEPARATION)

    def compare(self, other: Timing) -> str:
        """``"faster"``, ``"slower"`` or ``"within the noise"``: this timing against ``other``.

        An ordering is claimed only where the ranges do not overlap.
        """
        if self.overlaps(other):
            return "within the noise"
        return "faster" if self.max_s < other.min_s else "slower"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def time_call(
    fn: Callable[..., Any],
    *args: Any,
    repeats: int = MIN_REPEATS,
    warmup: int = 2,
    **kwargs: Any,
) -> Timing:
    """Time ``fn(*args, **kwargs)``, blocking until its results are ready.

    The warm-up calls absorb compilation and caching. At least :data:`MIN_REPEATS` calls are
    timed, so that the median and the spread mean something.
    """
    if repeats < MIN_REPEATS:
        raise ValueError(
            f"repeats must be at least {MIN_REPEATS} (a median and a spread need that many "
            f"calls), not {repeats}"
        )
    for _ in range(warmup):
        jax.block_until_ready(fn(*args, **kwargs))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args, **kwargs))
        samples.append(time.perf_counter() - start)
    return Timing(statistics.median(samples), min(samples), max(samples), repeats)


def time_interleaved(
    fns: Mapping[str, Callable[..., Any]],
    *args: Any,
    repeats: int = MIN_REPEATS,
    warmup: int = 2,
    before_each: Callable[[], Any] | None = None,
) -> dict[str, Timing]:
    """Time several functions on ``args`` in turns: after ``warmup`` calls of each, ``repeats``
    rounds that call every function once, the order rotated by one each round.
    ``before_each``, if given, runs before every timed call, outside the time (to clear a cache).

    On a shared machine the load drifts; timing one function after the other would hand each a
    different share of the drift. In turns, each meets the same drift, and each gets a median with
    its fastest and slowest call; :meth:`Timing.compare` claims an order only where those ranges
    do not overlap.
    """
    if repeats < MIN_REPEATS:
        raise ValueError(f"repeats must be at least {MIN_REPEATS}, not {repeats}")
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            jax.block_until_ready(fns[name](*args))
    samples: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        shift = round_ % len(names) if names else 0
        for name in names[shift:] + names[:shift]:
            if before_each is not None:
                before_each()
            start = time.perf_counter()
            jax.block_until_ready(fns[name](*args))
            samples[name].append(time.perf_counter() - start)
    return {
        name: Timing(statistics.median(s), min(s), max(s), repeats) for name, s in samples.items()
    }


@contextlib.contextmanager
def persistent_cache_off() -> Iterator[None]:
    """JAX's persistent compilation cache off for the compilations inside, then as it was.

    A program read from the cache is not compiled, so XLA writes no dump of it (its buffer
    assignment, say): a dump needs a real compilation. JAX keeps the dump options out of the
    cache key, so asking for a dump does not miss the cache by itself.
    """
    from jax.experimental.compilation_cache import compilation_cache

    before = bool(jax.config.jax_enable_compilation_cache)
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()  # the cache is asked once per process, then remembered
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", before)
        compilation_cache.reset_cache()
