"""The landing page's picture: memory against computation for one gradient, measured.

Sixteen residual MLP blocks (RMS norm, a widening product, GELU, a narrowing product) written as a
``jax.lax.scan`` over stacked weights (the usual shape of a deep model), differentiated three
ways: as written, with the scanned block checkpointed under a policy that keeps matrix products,
and with the block checkpointed keeping nothing. For each, the temporary memory XLA allocates for
``jax.grad`` and the FLOPs it counts (its memory and cost analyses of the compiled gradient),
and the arguments and outputs that XLA counts apart and that the whole step holds as well.

Why the middle point lies in between is structural, not a release's choice: without remat the
backward pass reads the normalized input, the pre-activation and several GELU intermediates of
every block; keeping only the products keeps the pre-activation alone and recomputes the cheap
norm and GELU from it; keeping nothing keeps only each block's input.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax

from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.measure import compiled_stats
from examples.tools.models import mlp_layer, scan_loss, stacked_mlp

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STRATEGIES: dict[str, Callable[[jax.Array, dict[str, jax.Array]], jax.Array]] = {
    "no checkpoint": mlp_layer,
    "checkpoint, keep matmuls": jax.checkpoint(
        mlp_layer, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    ),
    "checkpoint, keep nothing": jax.checkpoint(mlp_layer),
}

#: The FLOPs ratio that counting products predicts for "keep nothing": each block's forward pass
#: has two products of equal size and its backward pass four; the recomputation redoes only the
#: first, because the backward pass never reads the second product's output (its derivative
#: through the residual sum is the identity). (2 + 4 + 1) / (2 + 4).
PREDICTED_FULL_REMAT_FLOPS = 7 / 6


@dataclasses.dataclass(frozen=True)
class Tradeoff:
    strategy: str
    temp_bytes: int
    flops: float | None  #: ``None`` where XLA counts none
    relative_flops: float  #: FLOPs divided by those of "no checkpoint"; NaN where either is missing
    #: the arguments going in (weights, input) and the outputs coming out (the weights' gradients),
    #: which XLA counts apart from the temporaries and no strategy changes
    io_bytes: int = 0

    @property
    def step_bytes(self) -> int:
        """The whole step's footprint as XLA plans it: temporaries, arguments and outputs."""
        return self.temp_bytes + self.io_bytes


def measure(depth: int = 16, batch: int = 64, width: int = 128) -> list[Tradeoff]:
    weights, x = stacked_mlp(depth, batch, width)
    stats = {
        name: compiled_stats(jax.grad(scan_loss(fn)), weights, x) for name, fn in STRATEGIES.items()
    }
    base = stats["no checkpoint"].flops
    return [
        Tradeoff(
            name,
            s.temp_bytes,
            s.flops,
            s.flops / base if s.flops is not None and base else float("nan"),
            s.argument_bytes + s.output_bytes,
        )
        for name, s in stats.items()
    ]


def table(rows: list[Tradeoff]) -> Table:
    """The strategies' temporary memory and FLOPs relative to no checkpoint."""
    return Table(
        ["strategy", "temporary memory", "FLOPs vs. no checkpoint"],
        [
            [r.strategy, format_bytes(r.temp_bytes), format_ratio(r.flops, rows[0].flops)]
            for r in rows
        ],
    )


def plot(rows: list[Tradeoff]) -> Figure:
    """Two bar charts side by side: XLA's temporary memory, and FLOPs relative to no remat."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(8.5, 2.6), layout="constrained")
    labels = [r.strategy for r in rows]
    colors = ["#4C72B0", "#55A868", "#C44E52"][: len(rows)]
    left.barh(labels, [r.temp_bytes / 2**20 for r in rows], color=colors)
    left.set_xlabel("temporary memory for one gradient (MiB)")
    right.barh(labels, [r.relative_flops for r in rows], color=colors)
    right.set_xlabel("FLOPs, relative to no checkpoint")
    right.axvline(1.0, color="grey", linewidth=0.8, linestyle=":")
    right.set_yticklabels([])
    for ax in (left, right):
        ax.invert_yaxis()
        ax.spines[["top", "right"]].set_visible(False)
    return fig
