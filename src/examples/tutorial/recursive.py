"""Recursive checkpointing of a chain of ``D`` sines (the tutorial's explanation page): the
chain plain and with one half checkpointed at every level of a binary split, the residuals it
keeps and the sines and cosines it evaluates, against their formulas, as a table and a plot.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp

from examples.tools.display import Table
from examples.tools.residuals import saved_residuals
from examples.tutorial.fwd_bwd import fwd_bwd

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def chain_compose(funs: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """Apply ``funs`` in order: ``chain_compose([f1, f2])(x) == f2(f1(x))``."""

    def chained(x: Any) -> Any:
        for step in funs:
            x = step(x)
        return x

    return chained


def recursive_checkpoint(funs: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """Compose ``funs`` (applied last-to-first) checkpointing one half at every level of a
    binary split, so the residuals kept grow like ``log2(len(funs))``."""
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        outer, inner = funs
        return lambda x: outer(inner(x))
    half = len(funs) // 2
    outer = recursive_checkpoint(funs[:half])
    inner = jax.checkpoint(recursive_checkpoint(funs[half:]))
    return lambda x: outer(inner(x))


def plain_residual_formula(depth: int) -> int:
    """A chain of ``depth`` sines keeps one cosine per sine."""
    return depth


def recursive_residual_formula(depth: int) -> int:
    """Residuals kept by :func:`recursive_checkpoint` for ``depth`` sines.

    ``R(1) = 1`` (a cosine), ``R(2) = 2`` (two cosines), and for ``D >= 3`` the outer half's
    residuals plus the checkpointed inner half's input: ``R(D) = 1 + R(D // 2)``. That unrolls
    to ``floor(log2 D) + 1``.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    return depth.bit_length()


def recursive_sin_cos_formula(depth: int) -> int:
    """sin and cos evaluations of one gradient through :func:`recursive_checkpoint`, ``depth`` a
    power of two.

    The forward pass runs the checkpointed inner half without differentiating it (``D/2`` sines)
    and differentiates the outer half (``T(D/2)``); the backward pass differentiates the inner
    half again, where its final sine is dropped because only cosines are needed
    (``T(D/2) - 1``). So ``T(D) = D/2 + 2 T(D/2) - 1`` with ``T(2) = 4``, which solves to
    ``T(D) = D (log2 D + 2) / 2 + 1``, about ``(log2 D + 2) / 4`` times the plain ``2 D``.
    """
    if depth < 2 or depth & (depth - 1):
        raise ValueError(f"depth must be a power of two >= 2, not {depth}")
    log2 = depth.bit_length() - 1
    return depth * (log2 + 2) // 2 + 1


@dataclasses.dataclass(frozen=True)
class DepthRow:
    depth: int
    plain_residuals: int
    recursive_residuals: int
    plain_sin_cos: int  #: sin and cos evaluations, forward and backward, plain chain
    recursive_sin_cos: int  #: the same for the recursive scheme


def sin_cos_evaluations(fn: Callable[[Any], Any], x: Any) -> int:
    """``sin`` and ``cos`` equations in the forward and backward jaxprs of ``fn`` at ``x``.

    Each equation runs once (there are no loops in these jaxprs), so this counts evaluations;
    for scalar inputs it is the transcendental FLOP count of one gradient.
    """
    view = fwd_bwd(fn, x)
    return view.count("sin") + view.count("cos")


def depth_sweep(depths: Sequence[int] = (2, 4, 8, 16, 32, 64, 128)) -> list[DepthRow]:
    """Residuals kept and sin/cos evaluated for a chain of ``D`` sines, plain and recursive."""
    rows = []
    x = jnp.float32(3.0)
    for d in depths:
        plain, recursive = chain_compose([jnp.sin] * d), recursive_checkpoint([jnp.sin] * d)
        rows.append(
            DepthRow(
                depth=d,
                plain_residuals=len(saved_residuals(plain, x)),
                recursive_residuals=len(saved_residuals(recursive, x)),
                plain_sin_cos=sin_cos_evaluations(plain, x),
                recursive_sin_cos=sin_cos_evaluations(recursive, x),
            )
        )
    return rows


def depth_table(rows: Sequence[DepthRow]) -> Table:
    return Table(
        ["D", "kept: plain", "kept: recursive", "sin+cos: plain", "sin+cos: recursive"],
        [dataclasses.astuple(r) for r in rows],
    )


def plot_depth_sweep(rows: Sequence[DepthRow]) -> Figure:
    """Residuals kept (left) and sin/cos evaluations (right) against depth, log2 depth axis."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    depths = [r.depth for r in rows]
    fig, (mem, cost) = plt.subplots(1, 2, figsize=(8, 3), layout="constrained", dpi=90)
    styles = {"plain chain": ("#4C72B0", "o"), "recursive checkpoint": ("#C44E52", "s")}
    series = {
        "plain chain": ([r.plain_residuals for r in rows], [r.plain_sin_cos for r in rows]),
        "recursive checkpoint": (
            [r.recursive_residuals for r in rows],
            [r.recursive_sin_cos for r in rows],
        ),
    }
    for label, (kept, evaluations) in series.items():
        color, marker = styles[label]
        mem.plot(depths, kept, marker=marker, color=color, label=label)
        cost.plot(depths, evaluations, marker=marker, color=color, label=label)
    mem.set_ylabel("residuals kept after forward")
    mem.set_yscale("log", base=2)
    cost.set_ylabel("sin + cos evaluations (fwd + bwd)")
    cost.set_yscale("log", base=2)
    for ax in (mem, cost):
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.set_xscale("log", base=2)
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("chain depth D (number of sines)")
        ax.grid(True, which="major", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    mem.legend(frameon=False)
    return fig
