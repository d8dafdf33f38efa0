"""How-to (``docs/howto/remat-linen.md``): stacks of a small residual MLP block under Flax linen's
scans, compiled from shapes alone.

``nn.remat_scan`` against ``nn.scan`` at several depths (:func:`stacks`, :func:`depth_study`:
how each stack's memory grows with the depth), and the scan fully unrolled with and without the
checkpoint's barrier (:func:`unrolled_stacks`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from examples.howto.flax_steps import CONFIG
from examples.tools.display import Table, format_bytes
from examples.tools.measure import compiled_stats
from examples.tools.models import Config, rms_norm

Params = Any


class MLPBlock(nn.Module):
    """The depth study's layer: a residual MLP, which compiles faster than
    :class:`examples.howto.linen_training.Block`."""

    width: int = CONFIG.width

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return x + nn.Dense(self.width)(jax.nn.gelu(nn.Dense(4 * self.width)(rms_norm(x))))


class ScanMLPBlock(MLPBlock):
    def __call__(self, x: jax.Array) -> tuple[jax.Array, None]:  # type: ignore[override]
        return super().__call__(x), None


class Stack(nn.Module):
    """A stack of :class:`MLPBlock` applied by ``stack``, with nothing around it."""

    stack: Any
    nested: bool  #: ``nn.remat_scan``, whose body maps a carry to a carry

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        out = self.stack(name="layers")(x)
        return out if self.nested else out[0]  # type: ignore[no-any-return]


def scanned_stack(block: Any, depth: int, unroll: int = 1) -> Stack:
    """``nn.scan`` of ``block`` over ``depth`` layers, ``unroll`` of them per loop iteration."""
    lifted = nn.scan(
        block, variable_axes={"params": 0}, split_rngs={"params": True}, length=depth, unroll=unroll
    )
    return Stack(lifted, nested=False)


def stacks(depth: int) -> dict[str, Stack]:
    """The four stacks of the depth study, at ``depth`` = n² layers."""
    side = math.isqrt(depth)
    if side * side != depth:
        raise ValueError(f"depth {depth} is not a square; nn.remat_scan gets lengths (√L, √L)")

    def nested(block: Any) -> Stack:
        return Stack(nn.remat_scan(block, lengths=(side, side)), nested=True)

    remat = nn.remat(ScanMLPBlock, prevent_cse=False)
    return {
        "nn.scan(MLPBlock)": scanned_stack(ScanMLPBlock, depth),
        "nn.scan(nn.remat(MLPBlock))": scanned_stack(remat, depth),
        "nn.remat_scan(MLPBlock)": nested(MLPBlock),
        "nn.remat_scan(nn.remat(MLPBlock))": nested(nn.remat(MLPBlock, prevent_cse=False)),
    }


def unrolled_stacks(depth: int = 4) -> dict[str, Stack]:
    """The scan fully unrolled (``unroll=depth``): without remat, remat without the barrier
    (``prevent_cse=False``) and with it (the default)."""
    blocks = {
        "MLPBlock": ScanMLPBlock,
        "nn.remat(MLPBlock, prevent_cse=False)": nn.remat(ScanMLPBlock, prevent_cse=False),
        "nn.remat(MLPBlock)": nn.remat(ScanMLPBlock),
    }
    return {
        f"nn.scan({n}, unroll={depth})": scanned_stack(b, depth, depth) for n, b in blocks.items()
    }


def stack_temp_bytes(stack: Stack, cfg: Config = CONFIG) -> int:
    """XLA's temporary memory for the gradient of a stack, compiled from shapes alone."""
    x = jax.ShapeDtypeStruct((cfg.batch, cfg.seq, cfg.width), jnp.float32)
    params = jax.eval_shape(lambda: stack.init(jax.random.key(0), jnp.zeros(x.shape)))["params"]

    def loss(params: Params, x: jax.Array) -> jax.Array:
        y: jax.Array = stack.apply({"params": params}, x)  # type: ignore[assignment]
        return jnp.mean(y**2)

    return compiled_stats(jax.grad(loss), params, x).temp_bytes


#: The depths of the study: squares, so that ``nn.remat_scan`` gets lengths (√L, √L).
DEPTHS = (16, 64, 256)


def depth_study(depths: Sequence[int] = DEPTHS) -> dict[int, dict[str, int]]:
    """``{depth: {stack: XLA temp bytes}}`` for the four stacks at each depth."""
    return {
        depth: {name: stack_temp_bytes(s) for name, s in stacks(depth).items()} for depth in depths
    }


def depth_table(study: dict[int, dict[str, int]]) -> Table:
    names = list(next(iter(study.values())))
    return Table(
        ["layers", "lengths", *(f"`{n}`" for n in names)],
        [
            (depth, f"({math.isqrt(depth)}, {math.isqrt(depth)})", *map(format_bytes, row.values()))
            for depth, row in study.items()
        ],
    )


def depth_facts(study: dict[int, dict[str, int]]) -> dict[str, Any]:
    """Growth of each stack's memory from the smallest depth to the largest, and the smallest."""
    names = list(next(iter(study.values())))
    first, last = min(study), max(study)
    facts: dict[str, Any] = {"depth_first": first, "depth_last": last}
    facts["depth_ratio"] = f"{last / first:g}"
    facts["depth_sqrt_ratio"] = f"{math.sqrt(last / first):g}"
    for i, name in enumerate(names):
        facts[f"depth_growth_{i}"] = study[last][name] / study[first][name]
    smallest = {depth: min(row, key=row.__getitem__) for depth, row in study.items()}
    facts["depth_smallest"] = "; ".join(
        f"at {depth} layers {name}" for depth, name in smallest.items()
    )
    return facts
