"""Remat mistakes seen in real projects, each measured rather than told.

Backs ``docs/explorer/pitfalls.md``, in its order; tested in ``tests/explorer/test_pitfalls.py``.
The network is the tanh MLP of :mod:`examples.tools.models` (``tanh_layer``, ``stacked_tanh``,
``scan_loss``); the mixture-of-experts layer is one einsum over stacked expert weights.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

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


# --- 1b. expert weights in one einsum -----------------------------------------------------------

#: The einsum of the expert layer: experts e, tokens t, model width d, hidden width f.
EXPERTS_EINSUM = "etd,edf->etf"


def expert_inputs(
    experts: int = 4, tokens: int = 32, width: int = 64, hidden: int = 128
) -> tuple[jax.Array, jax.Array]:
    """Tokens routed to each expert ``(experts, tokens, width)`` and the experts' weights
    ``(experts, width, hidden)``."""
    kx, kw = jax.random.split(jax.random.key(0))
    x = jax.random.normal(kx, (experts, tokens, width))
    w = jax.random.normal(kw, (experts, width, hidden)) / width**0.5
    return x, w


def expert_layer(x: jax.Array, w: jax.Array) -> jax.Array:
    """Every expert's first product at once, as mixture-of-experts layers write it: one einsum
    over the stacked weights, named ``expert_product`` so that a policy can ask for it."""
    return jnp.tanh(checkpoint_name(jnp.einsum(EXPERTS_EINSUM, x, w), "expert_product"))


def expert_dimensions() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The batch dimensions ``(lhs, rhs)`` of the ``dot_general`` the expert einsum traces to:
    the expert axis of both operands."""
    jaxpr = jax.make_jaxpr(expert_layer)(*expert_inputs())
    (eqn,) = [e for e, _ in walk(jaxpr.jaxpr) if e.primitive.name == "dot_general"]
    _, (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    return tuple(lhs_batch), tuple(rhs_batch)


EXPERT_POLICIES: dict[str, Any] = {
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "dots_saveable": P.dots_saveable,
    'save_only_these_names("expert_product")': P.save_only_these_names("expert_product"),
}


def expert_residuals() -> dict[str, Residuals]:
    """What the checkpointed expert layer keeps under each of :data:`EXPERT_POLICIES`."""
    x, w = expert_inputs()
    return {
        name: saved_residuals(
            jax.checkpoint(lambda x, w: jnp.sum(expert_layer(x, w)), policy=policy), x, w
        )
        for name, policy in EXPERT_POLICIES.items()
    }


def expert_table(listings: dict[str, Residuals]) -> Table:
    """Values and bytes each policy keeps of the expert layer, its arguments left out."""
    rows = []
    for name, listing in listings.items():
        kept = listing.excluding_arguments()
        rows.append([f"`{name}`", _kept_values(kept), format_bytes(kept.nbytes)])
    return Table(["policy", "kept (besides the inputs)", "bytes"], rows)


def _kept_values(kept: Residuals) -> str:
    """``"dot_general f32[4,32,128]"``, one per value, or ``"nothing"``."""
    return ", ".join(f"{r.name!r}" if r.name else f"{r.detail} {r.type_str}" for r in kept) or (
        "nothing"
    )


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


def recomputation_kept(products: dict[str, tuple[int, int]], where: str) -> bool:
    """Whether XLA kept the recomputation at ``where``: more products compiled than without a
    checkpoint (``products`` from :func:`placement_products`)."""
    return products[where][1] > products["nowhere"][1]


def _flops_ratio(step: dict[str, tuple[Residuals, CompiledStats]], where: str) -> float:
    """XLA's FLOPs at ``where`` over no checkpoint's (XLA:CPU's cost analysis counts both)."""
    flops, base = step[where][1].flops, step["nowhere"][1].flops
    if flops is None or base is None:
        raise ValueError("XLA's cost analysis gave no FLOPs for this step")
    return flops / base


def whole_function_outcome(
    products: dict[str, tuple[int, int]], step: dict[str, tuple[Residuals, CompiledStats]]
) -> str:
    """What the training step pays for a checkpoint around the whole loss, on this build: a
    sentence that follows XLA's decision (``step``: ``placement_costs(value_and_grad=True)``)."""
    ratio = _flops_ratio(step, "whole function")
    if recomputation_kept(products, "whole function"):
        return (
            f"XLA keeps the second forward pass, so the training step pays {ratio:.2f} times the "
            "FLOPs of no checkpoint and saves no memory; a benchmark of jax.grad alone would "
            "call this checkpoint free"
        )
    return (
        "XLA merges the second forward pass with the first, so the training step pays "
        f"{ratio:.2f} times the FLOPs of no checkpoint: nothing spent, and nothing saved"
    )


def memory_against_none(step: dict[str, tuple[Residuals, CompiledStats]], where: str) -> str:
    """XLA's temporary memory at ``where`` against no checkpoint, with its size and its cost:
    "64.0 KiB (7%) less than no checkpoint's 960.0 KiB, for 1.25 times the FLOPs"."""
    temp, base = step[where][1].temp_bytes, step["nowhere"][1].temp_bytes
    ratio = _flops_ratio(step, where)
    cost = f"for {ratio:.2f} times the FLOPs"
    if temp == base:
        return f"the same as no checkpoint's ({format_bytes(base)}), {cost}"
    more_or_less = "less" if temp < base else "more"
    return (
        f"{format_bytes(abs(base - temp))} ({abs(base - temp) / base:.0%}) {more_or_less} than "
        f"no checkpoint's {format_bytes(base)}, {cost}"
    )


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


# --- 3b. save_anything_except_these_names -------------------------------------------------------


def named_stages(ws: Sequence[jax.Array], x: jax.Array) -> jax.Array:
    """Three tanh stages whose first two outputs are named ``stage0`` and ``stage1``."""
    h = checkpoint_name(tanh_layer(x, ws[0]), "stage0")
    h = checkpoint_name(tanh_layer(h, ws[1]), "stage1")
    return jnp.mean(tanh_layer(h, ws[2]) ** 2)


#: Two ways to ask for "keep the rest, not ``stage0``", next to keeping everything.
EXCEPT_POLICIES: dict[str, Any] = {
    "everything_saveable": P.everything_saveable,
    'save_anything_except_these_names("stage0")': P.save_anything_except_these_names("stage0"),
    'save_any_names_but_these("stage0")': P.save_any_names_but_these("stage0"),
}


def except_names_policies() -> dict[str, Residuals]:
    """What the three stages keep under each of :data:`EXCEPT_POLICIES`."""
    w, xs = stage_inputs(stages=3)
    ws = tuple(w)  # three arrays, so that no slice of a stacked weight shows among the residuals
    return {
        name: saved_residuals(jax.checkpoint(named_stages, policy=policy), ws, xs[0])
        for name, policy in EXCEPT_POLICIES.items()
    }


def except_names_table(listings: dict[str, Residuals]) -> Table:
    """Values and bytes each policy keeps of the named stages, their arguments left out."""
    rows = []
    for name, listing in listings.items():
        kept = listing.excluding_arguments()
        names = [r.name for r in kept if r.name]
        rows.append(
            [
                f"`{name}`",
                str(len(kept)),
                ", ".join(repr(n) for n in names) or "none",
                format_bytes(kept.nbytes),
            ]
        )
    return Table(["policy", "values kept", "names among them", "bytes"], rows)


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
