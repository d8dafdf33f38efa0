"""The tutorial's practical patterns: XLA's temporary memory for the checkpoint placements of
``h o g`` (beside the traced peaks of :mod:`examples.tutorial.liveness`), a nested scan that
checkpoints groups of layers (sub-linear memory for a scanned stack), and dropout under
recomputation.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools.display import Table, format_bytes
from examples.tools.measure import compile_for_analysis, compiled_stats
from examples.tools.models import scan_loss
from examples.tools.residuals import saved_residuals
from examples.tutorial.compiled import Params, dense_relu, mlp_inputs, relation
from examples.tutorial.traced import composition_variants

# -- XLA's memory for the placements of h o g -----------------------------------------------------


def placement_temp_bytes(x: jax.Array) -> dict[str, int]:
    """XLA's temporary memory for ``jax.grad`` of ``sum(fn(x))``, for each placement."""
    return {
        name: compiled_stats(jax.grad(lambda u, fn=fn: jnp.sum(fn(u))), x).temp_bytes
        for name, fn in composition_variants().items()
    }


def placement_fusions(x: jax.Array) -> dict[str, int]:
    """How many fused computations XLA's compiled ``jax.grad`` of ``sum(fn(x))`` runs, for each
    placement: a checkpoint's optimization barrier is opaque to fusion, so it can split a loop."""
    counts = {}
    for name, fn in composition_variants().items():
        compiled = compile_for_analysis(jax.jit(jax.grad(lambda u, fn=fn: jnp.sum(fn(u)))).lower(x))
        counts[name] = str(compiled.as_text()).count(" fusion(")
    return counts


def placement_temp_text(temps: dict[str, int], unit: str | None = "bytes") -> str:
    """``"no checkpoint: 0 B; ..."``: the figures in the page's order, for the prose (counts as
    they are where ``unit`` is ``None``)."""
    return "; ".join(f"{name}: {format_bytes(b) if unit else b}" for name, b in temps.items())


def placement_xla_table(
    peaks: dict[str, int], temps: dict[str, int], fusions: dict[str, int]
) -> Table:
    """The placements of ``h o g``: the traced peak (values the size of the input), and XLA's
    temporary memory and fused loops for the compiled gradient."""
    return Table(
        ["checkpoint on", "traced peak (values)", "XLA temp memory", "XLA fused loops"],
        [(name, peaks[name], format_bytes(temps[name]), fusions[name]) for name in temps],
    )


# -- a nested scan: checkpoint groups of layers ---------------------------------------------------


def nested_scan_loss(
    layer: Callable[[jax.Array, Params], jax.Array], group: int
) -> Callable[[Params, jax.Array], jax.Array]:
    """The loss of :func:`examples.tools.models.scan_loss`, scanned in two levels: an outer scan
    over groups of ``group`` layers, whose body is checkpointed, and inside it a plain scan over the
    group's layers. The backward pass keeps one input per group and re-runs one group at a time."""

    def loss(params: Params, x: jax.Array) -> jax.Array:
        depth = params[0].shape[0]
        if depth % group:
            raise ValueError(f"depth {depth} is not a multiple of the group size {group}")
        grouped = jax.tree.map(lambda p: p.reshape(depth // group, group, *p.shape[1:]), params)

        @jax.checkpoint
        def run_group(h: jax.Array, group_params: Params) -> tuple[jax.Array, None]:
            h, _ = jax.lax.scan(lambda c, p: (layer(c, p), None), h, group_params)
            return h, None

        h, _ = jax.lax.scan(run_group, x, grouped)
        return jnp.mean(h**2)

    return loss


@dataclasses.dataclass(frozen=True)
class NestedRow:
    name: str
    group: int | None  #: layers per checkpointed group (None: a flat scan)
    temp_bytes: int  #: XLA's temporary memory for the whole compiled gradient


def nested_rows(
    depth: int = 64, batch: int = 1024, width: int = 128, groups: tuple[int, ...] = (4, 8, 16)
) -> list[NestedRow]:
    """XLA's temporary memory for ``jax.grad`` of the flat scan (plain and checkpointed body)
    and of :func:`nested_scan_loss` for each group size."""
    params, x = mlp_inputs(depth, batch, width)
    variants: list[tuple[str, int | None, Callable[..., jax.Array]]] = [
        ("flat scan, plain body", None, scan_loss(dense_relu)),
        ("flat scan, jax.checkpoint(body)", None, scan_loss(jax.checkpoint(dense_relu))),
    ]
    variants += [
        (f"nested scan, groups of {g}", g, nested_scan_loss(dense_relu, g)) for g in groups
    ]
    return [
        NestedRow(name, g, compiled_stats(jax.grad(fn), params, x).temp_bytes)
        for name, g, fn in variants
    ]


def nested_table(rows: list[NestedRow]) -> Table:
    return Table(
        ["gradient of", "XLA temp memory"], [(r.name, format_bytes(r.temp_bytes)) for r in rows]
    )


def activations_per_layer(
    layer: Callable[[jax.Array, Params], jax.Array] = dense_relu, batch: int = 4, width: int = 8
) -> int:
    """How many values of the activations' shape one ``layer`` keeps for its backward pass, its
    input among them (:func:`dense_relu`: the input, for the weight's gradient, and the ReLU's
    derivative)."""
    params, x = mlp_inputs(depth=1, batch=batch, width=width)
    one_layer = jax.tree.map(lambda p: p[0], params)
    kept = saved_residuals(lambda h, p: jnp.sum(layer(h, p)), x, one_layer)
    return sum(r.shape == x.shape for r in kept)


def nested_facts(rows: list[NestedRow], depth: int, per_layer: int = 1) -> dict[str, Any]:
    """Figures for the nested-scan prose: the group of about sqrt(depth) layers against the
    checkpointed flat scan, and the group size that L/G + rG activations favours, with ``r =
    per_layer`` (:func:`activations_per_layer`)."""
    flat = next(r for r in rows if r.name == "flat scan, jax.checkpoint(body)")
    root = math.isqrt(depth)
    nested = next(r for r in rows if r.group == root)
    best = min((r for r in rows if r.group is not None), key=lambda r: r.temp_bytes)
    return {
        "nested_per_layer": per_layer,
        "nested_predicted_group": f"{math.sqrt(depth / per_layer):.1f}",
        "nested_depth": depth,
        "nested_group": root,
        "nested_flat_temp": format_bytes(flat.temp_bytes),
        "nested_temp": format_bytes(nested.temp_bytes),
        "nested_relation": relation(nested.temp_bytes, flat.temp_bytes),
        "nested_best_group": best.group,
        "nested_lower": nested.temp_bytes < flat.temp_bytes,
    }


# -- randomness under recomputation ---------------------------------------------------------------


def dropout_layer(h: jax.Array, W_b: Params, key: jax.Array, rate: float = 0.5) -> jax.Array:
    """:func:`examples.tutorial.compiled.dense_relu`, then dropout drawn from an explicit
    ``key``."""
    keep = jax.random.bernoulli(key, 1.0 - rate, h.shape)
    return jnp.where(keep, dense_relu(h, W_b) / (1.0 - rate), 0.0)


def dropout_loss(
    layer: Callable[[jax.Array, Params, jax.Array], jax.Array],
) -> Callable[[Params, jax.Array, jax.Array], jax.Array]:
    """A scan over layers with one dropout key per layer: the keys are scanned like weights."""

    def loss(params: Params, x: jax.Array, key: jax.Array) -> jax.Array:
        keys = jax.random.split(key, params[0].shape[0])
        h, _ = jax.lax.scan(lambda c, pk: (layer(c, pk[0], pk[1]), None), x, (params, keys))
        return jnp.mean(h**2)

    return loss


def dropout_gradients(depth: int = 4, batch: int = 8, width: int = 16) -> dict[str, Any]:
    """The gradient of :func:`dropout_loss` with a plain and with a checkpointed layer."""
    params, x = mlp_inputs(depth, batch, width)
    key = jax.random.key(1)
    layers = {"plain": dropout_layer, "checkpointed": jax.checkpoint(dropout_layer)}
    return {name: jax.grad(dropout_loss(layer))(params, x, key) for name, layer in layers.items()}
