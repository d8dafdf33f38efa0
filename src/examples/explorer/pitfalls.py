"""Remat mistakes seen in real projects, each measured rather than told.

Backs ``docs/explorer/pitfalls.md``; tested in ``tests/explorer/test_pitfalls.py``. The network is
the tanh MLP of :mod:`examples.tools.models` (``tanh_layer``, ``stacked_tanh``, ``scan_loss``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from examples.reference.release_table import releases_with
from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.jaxprs import walk
from examples.tools.measure import CompiledStats, compiled_stats
from examples.tools.models import scan_loss, stacked_tanh, tanh_layer
from examples.tools.residuals import Residuals, saved_residuals

P = jax.checkpoint_policies
VMAP_POLICIES = ("dots_with_no_batch_dims_saveable", "dots_saveable")


def stage_inputs(stages: int = 4, batch: int = 64, width: int = 256) -> tuple[jax.Array, jax.Array]:
    """Weights ``(stages, width, width)`` and one input per stage ``(stages, batch, width)``."""
    w, x = stacked_tanh(stages, batch, width)
    return w, x * jnp.linspace(0.5, 1.5, stages)[:, None, None]


# --- 1. vmap and batch dimensions ----------------------------------------------------------------


def vmapped_stages(policy: Any, shared_weights: bool = False) -> tuple[Residuals, Residuals]:
    """Residuals of one stage run alone, and of all stages run with ``jax.vmap``.

    Both apply ``jax.checkpoint(tanh_layer, policy=policy)`` to ``(h, w)``. With
    ``shared_weights`` every stage uses the same ``w`` (``in_axes=(0, None)``): only ``h`` is
    mapped. Without, each stage has its own weights (``in_axes=(0, 0)``), as pipeline stages do.
    """
    w, xs = stage_inputs()
    layer = jax.checkpoint(tanh_layer, policy=policy)
    alone = saved_residuals(lambda x, w: jnp.sum(layer(x, w)), xs[0], w[0])
    if shared_weights:
        mapped = jax.vmap(layer, in_axes=(0, None))
        ws = w[0]
    else:
        mapped = jax.vmap(layer, in_axes=(0, 0))
        ws = w
    return alone, saved_residuals(lambda x, w: jnp.sum(mapped(x, w)), xs, ws)


def product_dimensions(shared_weights: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The batch dimensions ``(lhs, rhs)`` of the ``dot_general`` that ``jax.vmap`` makes of
    ``h @ w`` in :func:`vmapped_stages`: empty with shared weights, the stage axis without."""
    w, xs = stage_inputs()
    in_axes = (0, None) if shared_weights else (0, 0)
    jaxpr = jax.make_jaxpr(jax.vmap(tanh_layer, in_axes=in_axes))(xs, w[0] if shared_weights else w)
    (eqn,) = [e for e, _ in walk(jaxpr.jaxpr) if e.primitive.name == "dot_general"]
    _, (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    return tuple(lhs_batch), tuple(rhs_batch)


def vmap_table(policies: Sequence[str] = VMAP_POLICIES) -> Table:
    """Bytes each policy keeps for one stage alone, and for the vmapped stages, both ways."""
    rows = []
    for name in policies:
        alone, shared = vmapped_stages(getattr(P, name), shared_weights=True)
        _, per_stage = vmapped_stages(getattr(P, name), shared_weights=False)
        rows.append(
            [f"`{name}`"]
            + [format_bytes(r.excluding_arguments().nbytes) for r in (alone, shared, per_stage)]
        )
    header = ["policy", "one stage", "vmapped, shared weights", "vmapped, per-stage weights"]
    return Table(header, rows)


# --- 2. checkpointing the whole function, or its last stage --------------------------------------


def _three_stages(w: jax.Array, x: jax.Array, wrap: str) -> jax.Array:
    if wrap == "first two stages":
        first = jax.checkpoint(lambda w, x: tanh_layer(tanh_layer(x, w[0]), w[1]))
        return jnp.mean(tanh_layer(first(w, x), w[2]) ** 2)
    stages: list[Callable[..., jax.Array]] = [tanh_layer, tanh_layer, tanh_layer]
    if wrap == "last stage":
        stages[2] = jax.checkpoint(tanh_layer)
    for i, stage in enumerate(stages):
        x = stage(x, w[i])
    return jnp.mean(x**2)


PLACEMENTS = ("nowhere", "whole function", "last stage", "first two stages")


def placement_function(where: str) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The three-stage loss with ``jax.checkpoint`` at ``where`` (one of :data:`PLACEMENTS`)."""
    if where == "whole function":
        return jax.checkpoint(lambda w, x: _three_stages(w, x, "nowhere"))
    return lambda w, x: _three_stages(w, x, where)


def count_products(fn: Callable[..., Any], *args: Any) -> tuple[int, int]:
    """Matrix products in ``jax.jit(fn)``'s program: as JAX lowers it (StableHLO
    ``dot_general``) and as XLA compiles it (HLO ``dot``), from JAX's own ``.lower()``,
    ``.as_text()`` and ``.compile().as_text()``."""
    lowered = jax.jit(fn).lower(*args)
    compiled = lowered.compile().as_text() or ""
    return (
        lowered.as_text().count("stablehlo.dot_general"),
        len(re.findall(r"\bdot\(", compiled)),
    )


def placement_products(value_and_grad: bool = True) -> dict[str, tuple[int, int]]:
    """:func:`count_products` of the gradient for each placement: whether XLA kept the
    recomputation JAX asked for (more products compiled than without a checkpoint) or removed
    it (as many as without)."""
    w, xs = stage_inputs(stages=3)
    differentiate = jax.value_and_grad if value_and_grad else jax.grad
    return {
        where: count_products(differentiate(placement_function(where)), w, xs[0])
        for where in PLACEMENTS
    }


def placement_costs(
    value_and_grad: bool = False,
) -> dict[str, tuple[Residuals, CompiledStats]]:
    """Residuals kept, and XLA's memory and FLOPs, for each placement of ``jax.checkpoint``.

    With ``value_and_grad`` the compiled function returns the loss as well as the gradient, as a
    training step does; with ``jax.grad`` alone the loss is dead code, which JAX drops from the
    program before XLA sees it.
    """
    w, xs = stage_inputs(stages=3)
    x = xs[0]
    differentiate = jax.value_and_grad if value_and_grad else jax.grad
    out = {}
    for where in PLACEMENTS:
        f = placement_function(where)
        out[where] = (saved_residuals(f, w, x), compiled_stats(differentiate(f), w, x))
    return out


def placement_table(costs: dict[str, tuple[Residuals, CompiledStats]]) -> Table:
    """One row per placement: residuals kept, XLA's temp memory, FLOPs against no checkpoint."""
    base = costs["nowhere"][1].flops
    rows = []
    for where, (listing, stats) in costs.items():
        kept = listing.excluding_arguments()
        rows.append(
            [
                where,
                f"{len(kept)} values, {format_bytes(kept.nbytes)}",
                format_bytes(stats.temp_bytes),
                format_ratio(stats.flops, base),
            ]
        )
    return Table(["`jax.checkpoint` on", "kept (jaxpr)", "XLA temp memory", "FLOPs vs. none"], rows)


# --- 3. policy=None ------------------------------------------------------------------------------


def none_versus_named_policies() -> dict[str, Residuals]:
    """``policy=None`` next to ``everything_saveable`` and ``nothing_saveable``."""
    w, xs = stage_inputs(stages=2)
    two = lambda w, x: jnp.mean(tanh_layer(tanh_layer(x[0], w[0]), w[1]) ** 2)
    return {
        "policy=None": saved_residuals(jax.checkpoint(two, policy=None), w, xs),
        "everything_saveable": saved_residuals(
            jax.checkpoint(two, policy=P.everything_saveable), w, xs
        ),
        "nothing_saveable": saved_residuals(jax.checkpoint(two, policy=P.nothing_saveable), w, xs),
    }


# --- 4. checkpoint inside or outside lax.scan ----------------------------------------------------


def scan_placement(depth: int = 16, batch: int = 64, width: int = 256) -> dict[str, CompiledStats]:
    """XLA's memory and FLOPs: checkpoint on the scanned body, around the scan, or absent."""
    w, x = stacked_tanh(depth, batch, width)
    variants = {
        "no checkpoint": scan_loss(tanh_layer),
        "checkpoint around the scan": jax.checkpoint(scan_loss(tanh_layer)),
        "checkpoint on the scanned body": scan_loss(jax.checkpoint(tanh_layer)),
    }
    return {name: compiled_stats(jax.grad(f), w, x) for name, f in variants.items()}


def scan_table(stats: dict[str, CompiledStats]) -> Table:
    base = stats["no checkpoint"].flops
    rows = [[k, format_bytes(s.temp_bytes), format_ratio(s.flops, base)] for k, s in stats.items()]
    return Table(["variant", "XLA temp memory", "FLOPs vs. no checkpoint"], rows)


def recomputation_kept_by_release(records: Sequence[dict[str, Any]]) -> dict[bool, str]:
    """Where XLA kept the recomputation of per-layer checkpoints in straight-line code, release
    by release: the ``straight_line`` fact of the release records (a stack of its own,
    :func:`examples.reference.release_facts.straight_line`),
    ``{True: releases that kept the recomputed products, False: releases that removed them}``,
    each as spans of the matrix (``"0.5.0–0.10.2"``)."""
    kept = [
        {**r, "facts": {"kept": sl["products_compiled"] > sl["products_without_checkpoint"]}}
        for r in records
        if (sl := r["facts"].get("straight_line"))
    ]
    return {answer: releases_with(kept, "kept", answer) for answer in (True, False)}
