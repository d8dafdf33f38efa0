"""The tutorial's "when not to checkpoint": a lone Dense layer, and the whole differentiated
function, measured on the traced program and on XLA's compiled one (the model and the
measurements are those of :mod:`examples.tutorial.compiled`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.residuals import saved_residuals
from examples.tutorial.compiled import (
    Params,
    XlaRow,
    dense,
    dense_relu,
    mlp_inputs,
    relation,
    same_figures,
    unrolled_loss,
    xla_row,
)
from examples.tutorial.liveness import program_peak_bytes

# -- when not to checkpoint -----------------------------------------------------------------------


def relu_of_checkpointed_dense(h: jax.Array, W_b: Params) -> jax.Array:
    """:func:`dense_relu` with only its Dense part under ``jax.checkpoint``."""
    return jnp.maximum(jax.checkpoint(dense)(h, W_b), 0.0)


def not_worth_it_variants() -> dict[str, Callable[..., jax.Array]]:
    """The MLP loss as is, with each lone Dense checkpointed, and with the whole loss
    checkpointed (with and without the optimization barrier)."""
    plain = unrolled_loss(dense_relu)
    return {
        "no checkpoint": plain,
        "each Dense on its own": unrolled_loss(relu_of_checkpointed_dense),
        "the whole loss": jax.checkpoint(plain),
        "the whole loss, prevent_cse=False": jax.checkpoint(plain, prevent_cse=False),
    }


@dataclasses.dataclass(frozen=True)
class NotWorthItRow:
    name: str
    residual_bytes: int  #: what the forward pass computes and keeps (arguments not counted)
    traced_peak_bytes: int  #: examples.tutorial.liveness on the traced gradient
    grad: XlaRow  #: jax.jit(jax.grad(loss))
    value_and_grad: XlaRow  #: jax.jit(jax.value_and_grad(loss)), what a training step runs


def not_worth_it_rows(depth: int = 8, batch: int = 256, width: int = 512) -> list[NotWorthItRow]:
    params, x = mlp_inputs(depth, batch, width)
    rows = []
    for name, loss in not_worth_it_variants().items():
        residuals = saved_residuals(loss, params, x).excluding_arguments()
        rows.append(
            NotWorthItRow(
                name,
                residual_bytes=residuals.nbytes,
                traced_peak_bytes=program_peak_bytes(jax.make_jaxpr(jax.grad(loss))(params, x)),
                grad=xla_row(name, jax.grad(loss), params, x),
                value_and_grad=xla_row(name, jax.value_and_grad(loss), params, x),
            )
        )
    return rows


def not_worth_it_table(rows: list[NotWorthItRow]) -> Table:
    base = rows[0]
    return Table(
        [
            "checkpoint on",
            "kept after forward",
            "traced peak",
            "XLA temp memory",
            "products (optimized)",
            "FLOPs vs none",
        ],
        [
            (
                r.name,
                format_bytes(r.residual_bytes),
                format_bytes(r.traced_peak_bytes),
                format_bytes(r.value_and_grad.temp_bytes),
                r.value_and_grad.compiled_dots,
                format_ratio(r.value_and_grad.flops, base.value_and_grad.flops),
            )
            for r in rows
        ],
    )


def _barrier_verdict(with_barrier: int, without: int, plain: int) -> str:
    """What the optimization barrier did to the whole loss's extra forward pass."""
    if with_barrier == plain:
        return "XLA merged the extra forward pass away even behind the barrier"
    if without == plain:
        return (
            f"the barrier is what keeps the extra forward pass: with prevent_cse=False the "
            f"program has {without} products"
        )
    return f"with prevent_cse=False the program still has {without} products"


def not_worth_it_facts(rows: list[NotWorthItRow]) -> dict[str, Any]:
    by = {r.name: r for r in rows}
    plain, lone = by["no checkpoint"], by["each Dense on its own"]
    whole, whole_nocse = by["the whole loss"], by["the whole loss, prevent_cse=False"]
    lone_same = (
        lone.residual_bytes == plain.residual_bytes
        and lone.traced_peak_bytes == plain.traced_peak_bytes
        and lone.grad.lowered_dots == plain.grad.lowered_dots
        and same_figures(lone.value_and_grad, plain.value_and_grad)
    )
    vg, base = whole.value_and_grad, plain.value_and_grad
    return {
        "lone_dense_verdict": (
            "are those of the model without it, in every column"
            if lone_same
            else "differ from those of the model without it"
        ),
        "whole_kept": format_bytes(whole.residual_bytes),
        "whole_peak_relation": relation(
            whole.traced_peak_bytes, plain.traced_peak_bytes, "traced peak"
        ),
        "whole_vg_products": vg.compiled_dots,
        "plain_vg_products": base.compiled_dots,
        "whole_vg_flops_ratio": (vg.flops or 0) / (base.flops or 1),
        "whole_vg_memory_relation": relation(vg.temp_bytes, base.temp_bytes),
        "whole_nocse_products": whole_nocse.value_and_grad.compiled_dots,
        "whole_barrier_verdict": _barrier_verdict(
            vg.compiled_dots, whole_nocse.value_and_grad.compiled_dots, base.compiled_dots
        ),
        "whole_grad_products": whole.grad.lowered_dots,
        "plain_grad_products": plain.grad.lowered_dots,
    }
