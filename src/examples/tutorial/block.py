"""The tutorial's transformer-shaped block under a scan: what each policy keeps, and what XLA
compiles from it.

The block is the shared pre-norm layer of :func:`examples.tools.models.block` (RMS norm,
attention written as two batched einsums, an MLP with GELU), scanned over a few small layers so
the page runs in seconds on a CPU. Unlike a Dense-and-ReLU layer, it computes much more than its
products, so the dots policies land between keeping nothing and keeping everything.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax

from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.measure import compiled_stats
from examples.tools.models import Config, block, init_inputs, init_params, scan_loss
from examples.tools.residuals import Residuals, saved_residuals

#: Four layers, a batch of two sequences of 64 tokens, width 64, four heads.
CONFIG = Config(layers=4, batch=2, seq=64, width=64, heads=4)


def block_inputs(cfg: Config = CONFIG) -> tuple[dict[str, jax.Array], jax.Array]:
    """``(params, x)``: every layer's weights stacked for ``jax.lax.scan``, and the input."""
    return init_params(cfg), init_inputs(cfg)


def block_layer(cfg: Config = CONFIG) -> Callable[[jax.Array, dict[str, jax.Array]], jax.Array]:
    """The scan body ``layer(h, p)``: :func:`~examples.tools.models.block` with ``cfg``'s heads."""
    return functools.partial(block, heads=cfg.heads)


def one_layer(params: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """The first layer's weights out of the stacked ones."""
    return {name: w[0] for name, w in params.items()}


def keep_weight_products(prim: Any, *avals: Any, **params: Any) -> bool:
    """A policy written by hand: keep a product that has no batch dimensions.

    JAX calls it once per equation with the primitive, the abstract values of the inputs and
    the equation's parameters as keyword arguments; ``dimension_numbers`` is one of those.
    """
    if prim is not jax.lax.dot_general_p:
        return False
    (_, _), (lhs_batch, _) = params["dimension_numbers"]
    return not lhs_batch


def offload_mlp_hidden() -> Any:
    """A policy that keeps nothing on the device and moves ``mlp_hidden`` to host memory."""
    return jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["mlp_hidden"],
        offload_src="device",
        offload_dst="pinned_host",
    )


def policies() -> dict[str, Any]:
    """The policies the page compares, from keeping nothing to keeping everything."""
    cp = jax.checkpoint_policies
    return {
        "nothing_saveable": cp.nothing_saveable,
        "dots_with_no_batch_dims_saveable": cp.dots_with_no_batch_dims_saveable,
        "dots_saveable": cp.dots_saveable,
        "everything_saveable": cp.everything_saveable,
    }


def layer_residuals(policy: Any, cfg: Config = CONFIG) -> Residuals:
    """What one checkpointed layer keeps under ``policy`` (``None``: no checkpoint)."""
    params, x = block_inputs(cfg)
    layer = block_layer(cfg)
    body = layer if policy is None else jax.checkpoint(layer, policy=policy)
    return saved_residuals(body, x, one_layer(params))


@dataclasses.dataclass(frozen=True)
class PolicyRow:
    policy: str
    kept: int  #: values one layer computes and keeps (arguments left out)
    kept_bytes: int  #: their bytes
    temp_bytes: int  #: XLA's temporary memory for the compiled gradient of the whole scan
    flops: float  #: XLA's FLOP count (a loop body is counted once)


def policy_rows(cfg: Config = CONFIG) -> list[PolicyRow]:
    """Residuals of one layer, and XLA's figures for ``jax.grad`` of the scanned loss, for no
    checkpoint and then each of :func:`policies`."""
    params, x = block_inputs(cfg)
    layer = block_layer(cfg)
    rows = []
    for name, policy in {"no checkpoint": None, **policies()}.items():
        body = layer if policy is None else jax.checkpoint(layer, policy=policy)
        kept = saved_residuals(body, x, one_layer(params)).excluding_arguments()
        stats = compiled_stats(jax.grad(scan_loss(body)), params, x)
        if stats.flops is None:
            raise RuntimeError(f"the {jax.default_backend()} backend reports no FLOP count")
        rows.append(PolicyRow(name, len(kept), kept.nbytes, stats.temp_bytes, stats.flops))
    return rows


def policy_table(rows: list[PolicyRow]) -> Table:
    base = rows[0]
    return Table(
        ["policy", "kept per layer", "XLA temp memory", "FLOPs vs no checkpoint"],
        [
            (
                r.policy if r.policy == "no checkpoint" else f"`{r.policy}`",
                f"{r.kept} values, {format_bytes(r.kept_bytes)}",
                format_bytes(r.temp_bytes),
                format_ratio(r.flops, base.flops),
            )
            for r in rows
        ],
    )


def _between(low: float, mid: float, high: float) -> str:
    if low < mid < high:
        return "between the two"
    if mid <= low:
        return "no more than keeping nothing"
    return "no less than keeping everything"


def policy_facts(rows: list[PolicyRow]) -> dict[str, Any]:
    """The figures the page's prose quotes, from :func:`policy_rows`."""
    by = {r.policy: r for r in rows}
    plain, nothing = by["no checkpoint"], by["nothing_saveable"]
    dots, no_batch = by["dots_saveable"], by["dots_with_no_batch_dims_saveable"]
    everything = by["everything_saveable"]
    return {
        "block_nothing_temp": format_bytes(nothing.temp_bytes),
        "block_everything_temp": format_bytes(everything.temp_bytes),
        "block_no_batch_temp": format_bytes(no_batch.temp_bytes),
        "block_dots_temp": format_bytes(dots.temp_bytes),
        "block_nothing_flops": nothing.flops / plain.flops,
        "block_no_batch_flops": no_batch.flops / plain.flops,
        "block_dots_flops": dots.flops / plain.flops,
        "block_no_batch_kept": no_batch.kept,
        "block_dots_kept": dots.kept,
        "block_everything_kept": everything.kept,
        "block_no_batch_where": _between(
            nothing.temp_bytes, no_batch.temp_bytes, everything.temp_bytes
        ),
        "block_dots_where": _between(nothing.temp_bytes, dots.temp_bytes, everything.temp_bytes),
    }
