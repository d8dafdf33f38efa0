"""What theory says a policy should cost, to hold the measurements against.

- :func:`layer_flops` and :func:`full_remat_flop_ratio`: the FLOPs of the block's matrix products,
  and what full remat should add to them;
- :func:`counted_share`: how much of those products XLA's FLOP count covers, which tells its
  counting convention (a loop body once; on GPU, no cuBLAS products);
- :func:`recursive_levels`: what recursive checkpointing costs per level, from the tutorial's
  own functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from examples.explorer.data import Result
from examples.explorer.model import NO_REMAT
from examples.tools.models import Config


def layer_flops(cfg: Config) -> dict[str, int]:
    """FLOPs of the matrix products in one block's forward pass (2 per multiply-add).

    This is the *F* of the page's theory. Elementwise work (norms, softmax, GELU) is left out:
    it is small next to the products at the sizes measured here.
    """
    tokens, d, h = cfg.batch * cfg.seq, cfg.width, cfg.mlp_ratio * cfg.width
    attention = 2 * cfg.batch * cfg.seq * cfg.seq * d  # q·k and weights·v, over all heads
    return {
        "wqkv": 2 * tokens * d * 3 * d,
        "attn_logits": attention,
        "attn_values": attention,
        "wo": 2 * tokens * d * d,
        "w1": 2 * tokens * d * h,
        "w2": 2 * tokens * h * d,
    }


def full_remat_flop_ratio(cfg: Config) -> tuple[float, float]:
    """FLOPs of a fully rematerialized gradient over a plain one, by counting products.

    Returns the textbook ratio, (F + 2F + F) / (F + 2F) = 4/3, and a refined one. The refined
    ratio knows that the recomputation stops early: the backward pass of ``h + hidden @ w2``
    needs ``hidden`` and ``w2`` but not their product, so JAX never recomputes the last product
    of the block (nothing the backward pass reads depends on it).
    """
    flops = layer_flops(cfg)
    forward = sum(flops.values())  # F
    plain = forward + 2 * forward  # forward, then backward
    textbook = (plain + forward) / plain  # one more forward pass
    refined = (plain + forward - flops["w2"]) / plain  # ... short of its last product
    return textbook, refined


def _flops(results: Sequence[Result], name: str) -> float:
    """XLA's FLOP count for policy ``name``; a clear error where the run recorded none."""
    flops = {r.policy: r for r in results}[name].flops
    if flops is None:
        raise ValueError(f"no FLOP count recorded for {name!r}: XLA reported none for this run")
    return flops


def flop_ratio(results: Sequence[Result], name: str = "nothing_saveable") -> float:
    """XLA's FLOPs of policy ``name`` over those of no remat."""
    return _flops(results, name) / _flops(results, NO_REMAT)


@dataclasses.dataclass(frozen=True)
class CountedShare:
    """XLA's FLOPs for the plain gradient against the products of one layer and of all layers."""

    of_one_layer: float  #: XLA's count / 3F of one layer
    of_all_layers: float  #: XLA's count / 3F of every layer

    @property
    def counts_products(self) -> bool:
        """Whether XLA's count covers the matrix products (at least half of one layer's 3F).

        XLA:CPU counts a scan's body once, so its count is close to one layer's 3F. XLA:GPU
        hands the products with the weights to cuBLAS and leaves them out (jax-ml/jax#22249), so
        its count falls far below. What it keeps depends on the GPU and the kernels chosen: the
        committed runs count the batched attention products once or twice
        (:func:`attention_share`), and elementwise work besides. FLOP ratios from such a run do
        not measure recomputation.
        """
        return self.of_one_layer >= 0.5


def counted_share(cfg: Config, results: Sequence[Result]) -> CountedShare:
    plain = _flops(results, NO_REMAT)
    one_layer = 3 * sum(layer_flops(cfg).values())
    return CountedShare(plain / one_layer, plain / (one_layer * cfg.layers))


def attention_share(cfg: Config, results: Sequence[Result]) -> float:
    """XLA's FLOPs for the plain gradient over the two batched attention products of one
    layer's forward pass (``attn_logits`` and ``attn_values`` of :func:`layer_flops`)."""
    flops = layer_flops(cfg)
    return _flops(results, NO_REMAT) / (flops["attn_logits"] + flops["attn_values"])


def offload_link_rate(results: Sequence[Result], offloaded: str, kept: str) -> float | None:
    """Bytes per second of the host link, if an offload's copies were simply added to the step:
    the bytes it moves (its host memory, to the host and back) over its extra step time against
    ``kept``, the policy that keeps the same values on the device. None where it was not slower
    or moved nothing."""
    rows = {r.policy: r for r in results}
    off, twin = rows[offloaded], rows[kept]
    if not off.host_temp_bytes or off.step_time_s is None or twin.step_time_s is None:
        return None
    extra = off.step_time_s - twin.step_time_s
    return 2 * off.host_temp_bytes / extra if extra > 0 else None


# --- recursive checkpointing (the tutorial's chain of sines) -----------------------------------


@dataclasses.dataclass(frozen=True)
class Level:
    depth: int  #: sines in the chain
    residuals: int  #: values kept by the tutorial's recursive_checkpoint
    forward_passes: float  #: sin and cos evaluations of one gradient, over the D of a forward pass
    added: float | None  #: forward passes added by this level (doubling the depth); None at first


def recursive_levels(depths: Sequence[int] = (4, 8, 16, 32, 64)) -> list[Level]:
    """What each level of recursive checkpointing costs, measured on the tutorial's functions.

    The tutorial checkpoints a chain of ``D`` sines recursively (``recursive_checkpoint``), so
    that doubling ``D`` adds one level. A forward pass evaluates ``D`` sines; the cost of one
    gradient is read off its jaxprs (``sin_cos_evaluations``) and expressed in forward passes.
    ``added`` is how many forward passes one more level adds: about one half, the limit of the
    tutorial's ``recursive_sin_cos_formula``.
    """
    from examples.tutorial.recursive import depth_sweep

    levels: list[Level] = []
    for row in depth_sweep(depths):
        passes = row.recursive_sin_cos / row.depth
        previous = levels[-1] if levels and levels[-1].depth * 2 == row.depth else None
        added = None if previous is None else passes - previous.forward_passes
        levels.append(Level(row.depth, row.recursive_residuals, passes, added))
    return levels
