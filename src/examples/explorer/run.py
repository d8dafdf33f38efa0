"""Measure every policy on the explorer's model: residuals, compiled memory and FLOPs, step time.

Memory and FLOPs come from XLA's analyses of the compiled gradient
(:func:`examples.measure.compiled_stats`); step times are the median and spread of at least
seven timed calls (:func:`examples.measure.time_call`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax

from examples.explorer.data import DepthPoint, Result, Run
from examples.explorer.model import NO_REMAT, POLICIES, layer_residuals, make_loss
from examples.measure import MIN_REPEATS, compiled_stats, time_call
from examples.models import Config, init_inputs, init_params
from examples.runinfo import collect


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
    """Measure every named policy (all of :data:`POLICIES` by default) on the model ``cfg``."""
    names = list(POLICIES) if policies is None else list(policies)
    _check_names(names)
    params, x = init_params(cfg), init_inputs(cfg)
    results = []
    for name in names:
        grad = jax.grad(make_loss(cfg, POLICIES[name]))
        stats = compiled_stats(grad, params, x)
        results.append(
            Result.with_timing(
                time_call(jax.jit(grad), params, x, repeats=repeats) if time_steps else None,
                policy=name,
                residual_bytes_per_layer=layer_residuals(cfg, POLICIES[name]).nbytes,
                temp_bytes=stats.temp_bytes,
                argument_bytes=stats.argument_bytes,
                host_temp_bytes=stats.host_temp_bytes,
                flops=stats.flops,
            )
        )
    return results


DEPTH_POLICIES = (NO_REMAT, "dots_with_no_batch_dims_saveable", "nothing_saveable")


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
