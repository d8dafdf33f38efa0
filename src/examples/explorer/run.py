"""Measure every policy on the explorer's model: residuals, compiled memory and FLOPs, step time.

Memory and FLOPs come from XLA's analyses of the compiled gradient
(:func:`examples.tools.measure.compiled_stats`); step times are the median and spread of at least
seven timed calls per policy, taken in rounds that call every policy once, in a rotated order
(:func:`examples.tools.measure.time_interleaved`), so that a slow spell of a shared machine falls on
all of them rather than on whichever policy was being timed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax

from examples.explorer.data import DepthPoint, Result, Run
from examples.explorer.model import NO_REMAT, POLICIES, layer_residuals, make_loss
from examples.tools.measure import MIN_REPEATS, Timing, compiled_stats, time_interleaved
from examples.tools.models import Config, init_inputs, init_params
from examples.tools.runinfo import collect


def _check_names(names: Sequence[str]) -> None:
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise KeyError(f"unknown policies {unknown}; known: {list(POLICIES)}")


def measure(
    cfg: Config,
    policies: Sequence[str] | None = None,
    repeats: int = MIN_REPEATS,
    time_steps: bool = True,
) -> list[Result]:
    """Measure every named policy (all of :data:`POLICIES` by default) on the model ``cfg``;
    the step times are taken interleaved (:func:`examples.tools.measure.time_interleaved`)."""
    names = list(POLICIES) if policies is None else list(policies)
    _check_names(names)
    params, x = init_params(cfg), init_inputs(cfg)
    grads = {name: jax.grad(make_loss(cfg, POLICIES[name])) for name in names}
    stats = {name: compiled_stats(grad, params, x, runs=time_steps) for name, grad in grads.items()}
    timings: dict[str, Timing | None] = dict.fromkeys(names)
    if time_steps:
        jitted = {name: jax.jit(grad) for name, grad in grads.items()}
        timings.update(time_interleaved(jitted, params, x, repeats=repeats))
    return [
        Result.with_timing(
            timings[name],
            policy=name,
            residual_bytes_per_layer=layer_residuals(cfg, POLICIES[name]).nbytes,
            temp_bytes=stats[name].temp_bytes,
            argument_bytes=stats[name].argument_bytes,
            host_temp_bytes=stats[name].host_temp_bytes,
            flops=stats[name].flops,
        )
        for name in names
    ]


DEPTH_POLICIES = (NO_REMAT, "dots_with_no_batch_dims_saveable", "nothing_saveable")

#: The policies whose cost :func:`barrier_costs` measures with and without ``prevent_cse``.
BARRIER_POLICIES = (
    "everything_saveable",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "nothing_saveable",
)


@dataclasses.dataclass(frozen=True)
class BarrierCost:
    """One policy's compiled gradient with JAX's default ``prevent_cse=True`` and without it."""

    policy: str
    temp_bytes: int  #: with the barrier (the default, what the page's table measures)
    temp_bytes_without: int  #: ``prevent_cse=False``
    flops: float | None
    flops_without: float | None


def barrier_costs(cfg: Config, policies: Sequence[str] = BARRIER_POLICIES) -> list[BarrierCost]:
    """Compiled temporary memory and FLOPs of each policy's gradient, scanned as on the page, with
    and without ``prevent_cse`` (compilation only, no timing)."""
    _check_names(policies)
    params, x = init_params(cfg), init_inputs(cfg)
    found = []
    for name in policies:
        with_, without = (
            compiled_stats(jax.grad(make_loss(cfg, POLICIES[name], prevent_cse=cse)), params, x)
            for cse in (True, False)
        )
        found.append(
            BarrierCost(name, with_.temp_bytes, without.temp_bytes, with_.flops, without.flops)
        )
    return found


def depth_sweep(
    cfg: Config, layers: Sequence[int] = (2, 4, 8, 16), policies: Sequence[str] = DEPTH_POLICIES
) -> list[DepthPoint]:
    """Compiled temporary memory against the number of layers (compilation only, no timing)."""
    _check_names(policies)
    points = []
    for depth in layers:
        c = dataclasses.replace(cfg, layers=depth)
        params, x = init_params(c), init_inputs(c)
        for name in policies:
            stats = compiled_stats(jax.grad(make_loss(c, POLICIES[name])), params, x)
            points.append(DepthPoint(name, depth, stats.temp_bytes))
    return points


def run(
    cfg: Config,
    repeats: int = MIN_REPEATS,
    layers: Sequence[int] = (2, 4, 8, 16),
    policies: Sequence[str] | None = None,
) -> Run:
    """Everything the page shows for one machine: the policy table and the depth sweep."""
    depth_policies = [p for p in DEPTH_POLICIES if policies is None or p in policies]
    return Run(
        collect().as_dict(),
        cfg,
        measure(cfg, policies, repeats=repeats),
        depth_sweep(cfg, layers, depth_policies),
    )
