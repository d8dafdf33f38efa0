"""The tutorial's compiled measurements: what XLA makes of ``jax.checkpoint`` under ``jax.jit``.

One model throughout, a ReLU MLP whose layers are ``(W, b)`` pairs stacked along a leading axis:

1. scan over layers (:func:`examples.tools.models.scan_loss`), one row per scan body: XLA's
   temporary memory and its FLOP count, which covers one pass through each loop body, not the whole
   gradient (:func:`scan_rows`, :func:`flops_by_depth`);
2. the same layers in a Python loop, so the program is straight-line, with and without a
   checkpoint per layer: products in the lowered and in the optimized program, optimization
   barriers, memory and FLOPs, and the checkpointed one compiled with the barriers kept to the
   end (:func:`straight_line_rows`);

"When not to checkpoint" measures the same model in :mod:`examples.tutorial.when_not`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools import compat
from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.measure import compile_for_analysis, compiled_stats
from examples.tools.models import scan_loss

Params = tuple[jax.Array, jax.Array]

# -- the model ------------------------------------------------------------------------------------


def dense(h: jax.Array, W_b: Params) -> jax.Array:
    """A Dense layer on its own: ``h @ W + b``."""
    W, b = W_b
    return h @ W + b


def dense_relu(h: jax.Array, W_b: Params) -> jax.Array:
    """One MLP layer: Dense, then ReLU. ``W_b`` is this layer's ``(W, b)``."""
    W, b = W_b
    return jnp.maximum(h @ W + b, 0.0)


@partial(jax.checkpoint, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
def dense_relu_keep_dots(h: jax.Array, W_b: Params) -> jax.Array:
    """:func:`dense_relu` under a checkpoint that may keep its matrix product."""
    W, b = W_b
    return jnp.maximum(h @ W + b, 0.0)


def mlp_inputs(
    depth: int = 32, batch: int = 256, width: int = 512, seed: int = 0
) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
    """``((Ws, bs), x)``: weights ``(depth, width, width)``, biases ``(depth, width)``, and an
    input ``(batch, width)``."""
    kw, kx = jax.random.split(jax.random.key(seed))
    Ws = jax.random.normal(kw, (depth, width, width)) * (2.0 / width) ** 0.5
    bs = jnp.full((depth, width), 0.01)
    return (Ws, bs), jax.random.normal(kx, (batch, width))


def unrolled_loss(layer: Callable[[jax.Array, Params], jax.Array]) -> Callable[..., jax.Array]:
    """:func:`examples.tools.models.scan_loss` with the loop written in Python: a straight-line
    program with one copy of ``layer`` per layer."""

    def loss(params: Params, x: jax.Array) -> jax.Array:
        Ws, bs = params
        for i in range(Ws.shape[0]):
            x = layer(x, (Ws[i], bs[i]))
        return jnp.mean(x**2)

    return loss


def matmul_flops(batch: int, width: int) -> int:
    """FLOPs of one ``(batch, width) @ (width, width)`` product: a multiply and an add each."""
    return 2 * batch * width * width


# -- 1. scan over layers --------------------------------------------------------------------------

SCAN_BODIES: dict[str, Callable[[jax.Array, Params], jax.Array]] = {
    "plain body": dense_relu,
    "jax.checkpoint(body)": jax.checkpoint(dense_relu),
    "jax.checkpoint(body, prevent_cse=False)": jax.checkpoint(dense_relu, prevent_cse=False),
    "dots policy (decorator)": dense_relu_keep_dots,
}


@dataclasses.dataclass(frozen=True)
class ScanRow:
    body: str
    temp_bytes: int  #: XLA's temporary memory for the whole compiled gradient
    flops: float  #: XLA's FLOP count: each loop body counted once
    depth: int
    matmul: int  #: FLOPs of one layer's matrix product

    @property
    def body_matmuls(self) -> float:
        """XLA's count in units of one layer's product (3 plain: forward, two for backward)."""
        return self.flops / self.matmul

    @property
    def whole_flops(self) -> float:
        """The whole gradient: every iteration runs the loop bodies once more."""
        return self.flops * self.depth


def scan_rows(depth: int = 32, batch: int = 256, width: int = 512) -> list[ScanRow]:
    """Compile ``jax.grad`` of the scan-over-layers loss for each of :data:`SCAN_BODIES`."""
    params, x = mlp_inputs(depth, batch, width)
    rows = []
    for name, body in SCAN_BODIES.items():
        stats = compiled_stats(jax.grad(scan_loss(body)), params, x)
        if stats.flops is None:
            raise RuntimeError(f"the {jax.default_backend()} backend reports no FLOP count")
        rows.append(ScanRow(name, stats.temp_bytes, stats.flops, depth, matmul_flops(batch, width)))
    return rows


def scan_table(rows: list[ScanRow]) -> Table:
    base = rows[0]
    return Table(
        [
            "scan body",
            "XLA temp memory",
            "XLA FLOPs (loop bodies once)",
            "the same, in layer products",
            "whole gradient (× depth)",
            "vs plain",
        ],
        [
            (
                f"`{r.body}`",
                format_bytes(r.temp_bytes),
                f"{r.flops / 1e6:,.0f} M",
                f"{r.body_matmuls:.2f}",
                f"{r.whole_flops / 1e9:,.2f} G",
                format_ratio(r.whole_flops, base.whole_flops),
            )
            for r in rows
        ],
    )


def flops_by_depth(
    depths: tuple[int, ...] = (8, 32), batch: int = 256, width: int = 512
) -> dict[int, tuple[float, float]]:
    """XLA's FLOP count for the plain gradient, scanned and unrolled, at each depth."""
    out: dict[int, tuple[float, float]] = {}
    for depth in depths:
        params, x = mlp_inputs(depth, batch, width)
        scanned = compiled_stats(jax.grad(scan_loss(dense_relu)), params, x).flops
        unrolled = compiled_stats(jax.grad(unrolled_loss(dense_relu)), params, x).flops
        if scanned is None or unrolled is None:
            raise RuntimeError(f"the {jax.default_backend()} backend reports no FLOP count")
        out[depth] = (scanned, unrolled)
    return out


def flops_by_depth_table(counts: dict[int, tuple[float, float]]) -> Table:
    return Table(
        ["depth", "scan: XLA FLOPs", "Python loop: XLA FLOPs", "ratio"],
        [
            (d, f"{s / 1e6:,.0f} M", f"{u / 1e6:,.0f} M", f"{u / s:.1f}")
            for d, (s, u) in counts.items()
        ],
    )


# -- 2. straight-line code under jit --------------------------------------------------------------

_LOWERED_DOT = re.compile(r"stablehlo\.dot_general\b")
_COMPILED_DOT = re.compile(r"\bdot\(")
_LOWERED_BARRIER = re.compile(r"stablehlo\.optimization_barrier\b")
_COMPILED_BARRIER = re.compile(r"\bopt-barrier\(")


@dataclasses.dataclass(frozen=True)
class XlaRow:
    """What one function looks like before and after XLA's optimizations."""

    name: str
    lowered_dots: int  #: matrix products in the program JAX hands to XLA
    compiled_dots: int  #: matrix products in XLA's optimized program
    lowered_barriers: int  #: optimization barriers JAX emitted
    compiled_barriers: int  #: optimization barriers left after optimization
    temp_bytes: int
    flops: float | None


#: Compiler option that keeps XLA's ``cse_barrier_expander`` pass from running, so the
#: optimization barriers JAX emits stay in the optimized program (see the page's section).
KEEP_BARRIERS = {"xla_disable_hlo_passes": "cse_barrier_expander"}


def xla_row(
    name: str, fn: Callable[..., Any], *args: Any, compiler_options: dict[str, str] | None = None
) -> XlaRow:
    """Lower and compile ``jax.jit(fn)`` and read its text, memory and cost analyses."""
    lowered = jax.jit(fn).lower(*args)
    if compiler_options:
        compiled = compat.compile_with_options(lowered, compiler_options)
    else:
        compiled = compile_for_analysis(lowered)
    before, after = str(lowered.as_text()), str(compiled.as_text())
    cost = compat.cost_analysis(compiled)
    return XlaRow(
        name,
        lowered_dots=len(_LOWERED_DOT.findall(before)),
        compiled_dots=len(_COMPILED_DOT.findall(after)),
        lowered_barriers=len(_LOWERED_BARRIER.findall(before)),
        compiled_barriers=len(_COMPILED_BARRIER.findall(after)),
        temp_bytes=int(compiled.memory_analysis().temp_size_in_bytes),
        flops=float(cost["flops"]) if cost and "flops" in cost else None,
    )


STRAIGHT_LINE_LAYERS: dict[str, Callable[[jax.Array, Params], jax.Array]] = {
    "no checkpoint": dense_relu,
    "jax.checkpoint per layer": jax.checkpoint(dense_relu),
    "jax.checkpoint per layer, prevent_cse=False": jax.checkpoint(dense_relu, prevent_cse=False),
}
BARRIERS_KEPT = "jax.checkpoint per layer, cse_barrier_expander off"


def straight_line_rows(depth: int = 32, batch: int = 256, width: int = 512) -> list[XlaRow]:
    """``jax.grad`` of :func:`unrolled_loss` for each of :data:`STRAIGHT_LINE_LAYERS`, and the
    checkpointed one compiled with :data:`KEEP_BARRIERS`."""
    params, x = mlp_inputs(depth, batch, width)
    rows = [
        xla_row(name, jax.grad(unrolled_loss(layer)), params, x)
        for name, layer in STRAIGHT_LINE_LAYERS.items()
    ]
    checkpointed = jax.grad(unrolled_loss(STRAIGHT_LINE_LAYERS["jax.checkpoint per layer"]))
    rows.append(xla_row(BARRIERS_KEPT, checkpointed, params, x, compiler_options=KEEP_BARRIERS))
    return rows


def xla_table(rows: list[XlaRow]) -> Table:
    base = rows[0]
    return Table(
        [
            "layers",
            "products: lowered",
            "products: optimized",
            "barriers: lowered",
            "barriers: optimized",
            "XLA temp memory",
            "FLOPs vs first row",
        ],
        [
            (
                r.name,
                r.lowered_dots,
                r.compiled_dots,
                r.lowered_barriers,
                r.compiled_barriers,
                format_bytes(r.temp_bytes),
                format_ratio(r.flops, base.flops),
            )
            for r in rows
        ],
    )


# -- what the page says about these figures -------------------------------------------------------


def relation(value: float, base: float, noun: str = "temporary memory") -> str:
    """``"the same temporary memory as"``, or ``"64.0 KiB more temporary memory than"`` (or
    ``less``), bytes compared exactly."""
    if value == base:
        return f"the same {noun} as"
    return f"{format_bytes(abs(value - base))} {'more' if value > base else 'less'} {noun} than"


def same_figures(a: XlaRow, b: XlaRow) -> bool:
    return (a.compiled_dots, a.temp_bytes, a.flops) == (b.compiled_dots, b.temp_bytes, b.flops)


def scan_facts(rows: list[ScanRow], counts: dict[int, tuple[float, float]]) -> dict[str, Any]:
    """Figures and verdicts for the scan section's prose (glued on the page)."""
    by = {r.body: r for r in rows}
    plain, ck = by["plain body"], by["jax.checkpoint(body)"]
    nocse, dots = by["jax.checkpoint(body, prevent_cse=False)"], by["dots policy (decorator)"]
    (d_small, (scan_small, unrolled_small)), (d_big, (scan_big, unrolled_big)) = (
        min(counts.items()),
        max(counts.items()),
    )
    return {
        "scan_depth": plain.depth,
        "scan_matmul_mflops": plain.matmul / 1e6,
        "scan_plain_temp": format_bytes(plain.temp_bytes),
        "scan_ck_temp": format_bytes(ck.temp_bytes),
        "scan_ck_temp_relation": relation(ck.temp_bytes, plain.temp_bytes),
        "scan_plain_matmuls": plain.body_matmuls,
        "scan_ck_matmuls": ck.body_matmuls,
        "scan_ck_flops_ratio": ck.flops / plain.flops,
        "scan_nocse_verdict": (
            f"{relation(nocse.temp_bytes, ck.temp_bytes)} the default body, at "
            f"{nocse.flops / ck.flops:.2f} times its FLOPs"
        ),
        "scan_dots_temp_relation": relation(dots.temp_bytes, plain.temp_bytes),
        "scan_dots_flops_ratio": dots.flops / plain.flops,
        "depth_small": d_small,
        "depth_big": d_big,
        "scan_count_verdict": (
            "the same at both depths" if scan_small == scan_big else "different at the two depths"
        ),
        "tldr_scan": (
            f"kept its recomputation and cut XLA's temporary memory from "
            f"{format_bytes(plain.temp_bytes)} to {format_bytes(ck.temp_bytes)}"
            if ck.flops > plain.flops and ck.temp_bytes < plain.temp_bytes
            else f"used {relation(ck.temp_bytes, plain.temp_bytes)} the plain body, at "
            f"{ck.flops / plain.flops:.2f} times its FLOPs"
        ),
        "unrolled_growth": unrolled_big / unrolled_small,
        "unrolled_over_scan": unrolled_big / scan_big,
    }


def straight_line_facts(rows: list[XlaRow]) -> dict[str, Any]:
    """Figures and verdicts for the straight-line section (glued on the page)."""
    by = {r.name: r for r in rows}
    plain, ck = by["no checkpoint"], by["jax.checkpoint per layer"]
    nocse, kept = by["jax.checkpoint per layer, prevent_cse=False"], by[BARRIERS_KEPT]
    extra = ck.lowered_dots - plain.lowered_dots

    def products(row: XlaRow) -> str:
        if row.compiled_dots <= plain.compiled_dots:
            return f"all {extra} recomputed products were merged away ({row.compiled_dots} left)"
        if row.compiled_dots < row.lowered_dots:
            return f"{row.lowered_dots - row.compiled_dots} of the {extra} recomputed products went"
        return f"all {extra} recomputed products survived ({row.compiled_dots} in all)"

    survived, saved = ck.compiled_dots > plain.compiled_dots, ck.temp_bytes < plain.temp_bytes
    memory = (
        f"used {relation(ck.temp_bytes, plain.temp_bytes)} the plain program"
        if saved
        else "saved no memory"
    )
    return {
        "tldr_straight": (
            f"per-layer checkpoints in straight-line code "
            f"{'kept their recomputation' if survived else 'lost their recomputation to CSE'} "
            f"and {memory}"
        ),
        "summary_straight": (
            f"{'kept' if survived else 'merged away'} the recomputation of per-layer checkpoints "
            f"and {memory}"
        ),
        "sl_plain_products": plain.lowered_dots,
        "sl_ck_extra": extra,
        "sl_ck_barriers": ck.lowered_barriers,
        "sl_ck_barriers_left": ck.compiled_barriers,
        "sl_ck_products_verdict": products(ck),
        "sl_ck_memory_relation": relation(ck.temp_bytes, plain.temp_bytes),
        "sl_ck_flops_ratio": (ck.flops or 0) / (plain.flops or 1),
        "sl_plain_temp": format_bytes(plain.temp_bytes),
        "sl_nocse_barriers": nocse.lowered_barriers,
        "sl_nocse_verdict": products(nocse),
        "sl_kept_barriers_left": kept.compiled_barriers,
        "sl_kept_verdict": products(kept),
        "sl_kept_memory_relation": relation(kept.temp_bytes, plain.temp_bytes),
        "sl_order": (
            "after CSE had run, which left them in place to protect the recomputation"
            if survived
            else "before CSE ran, so CSE found no barrier and merged each recomputed product "
            "with the forward one"
        ),
        "sl_recompute_survived": survived,
        "sl_memory_saved": saved,
    }
