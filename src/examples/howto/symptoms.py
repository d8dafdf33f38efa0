"""The measurements of the guide "When remat goes wrong: symptom to fix".

Every variant is the site's pre-norm transformer (:mod:`examples.tools.models`) trained with a scan
over layers; they differ only in where ``jax.checkpoint`` sits and which policy it has. For each,
:func:`measure` asks JAX what the forward pass keeps for the backward pass and XLA what the
compiled step allocates and computes, and can time the step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.measure import Timing, compiled_stats, stats_of
from examples.tools.models import Config, block, init_inputs, init_params, scan_loss
from examples.tools.residuals import saved_residuals

P = jax.checkpoint_policies

#: The page's model: six layers, and a sequence long enough that the attention logits of one
#: layer (batch × heads × seq × seq) outweigh its MLP activations (batch × seq × 4 × width).
CONFIG = Config(layers=6, batch=2, seq=256, width=128, heads=4)

Loss = Callable[[Any, jax.Array], jax.Array]


def layer(cfg: Config) -> Callable[[jax.Array, Any], jax.Array]:
    """One transformer block as the scanned function ``(carry, layer_params) -> carry``."""

    def apply(h: jax.Array, p: Any) -> jax.Array:
        return block(h, p, cfg.heads)

    return apply


def block_checkpointed(cfg: Config, policy: Any) -> Loss:
    """The usual placement: the scanned block checkpointed with ``policy``."""
    return scan_loss(jax.checkpoint(layer(cfg), policy=policy))


def whole_loss_checkpointed(cfg: Config) -> Loss:
    """The anti-pattern: one checkpoint around the whole function that is differentiated."""
    return jax.checkpoint(scan_loss(layer(cfg)))


def variants(cfg: Config = CONFIG) -> dict[str, Loss]:
    """The losses the page compares, by the name its tables give them."""
    names = P.save_only_these_names
    return {
        "no checkpoint": scan_loss(layer(cfg)),
        "whole loss checkpointed": whole_loss_checkpointed(cfg),
        "block, nothing_saveable": block_checkpointed(cfg, P.nothing_saveable),
        "block, dots_with_no_batch_dims_saveable": block_checkpointed(
            cfg, P.dots_with_no_batch_dims_saveable
        ),
        "block, save_only_these_names('mlp_hidden')": block_checkpointed(cfg, names("mlp_hidden")),
        "block, save_only_these_names('attn_logits')": block_checkpointed(
            cfg, names("attn_logits")
        ),
        "block, save_only_these_names('mlp_hiden')": block_checkpointed(cfg, names("mlp_hiden")),
        "block, everything_saveable": block_checkpointed(cfg, P.everything_saveable),
        EVERYTHING_NO_BARRIER: scan_loss(
            jax.checkpoint(layer(cfg), policy=P.everything_saveable, prevent_cse=False)
        ),
    }


#: The same policy without the optimization barrier that ``prevent_cse=True`` (the default) adds.
EVERYTHING_NO_BARRIER = "block, everything_saveable, prevent_cse=False"


def barriers(loss: Loss, *args: Any) -> int:
    """``optimization_barrier`` operations in the lowered step (``jax.jit(...).lower(...)``):
    what ``prevent_cse=True`` leaves for XLA. The compiled program no longer shows them."""
    text = jax.jit(jax.value_and_grad(loss)).lower(*args).as_text()
    return text.count("optimization_barrier")


def inputs(cfg: Config = CONFIG) -> tuple[dict[str, jax.Array], jax.Array]:
    return init_params(cfg), init_inputs(cfg)


# --- measuring ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    """One variant: what JAX keeps for the backward pass and what XLA compiles for the step."""

    name: str
    kept_bytes: int  #: residuals the forward pass computes and keeps (inputs left out)
    temp_bytes: int  #: XLA's temporary memory for the compiled step
    flops: float | None  #: XLA's FLOP count for the step (a loop body counted once)
    timing: Timing | None = None


def measure(
    names: Sequence[str], cfg: Config = CONFIG, time: bool = False, repeats: int = 7
) -> list[Row]:
    """Measure the named :func:`variants` on ``cfg``; with ``time``, time the compiled steps in
    turns (one call of each, round after round: median, fastest and slowest call)."""
    losses = variants(cfg)
    unknown = [n for n in names if n not in losses]
    if unknown:
        raise KeyError(f"no variant named {unknown}; the variants are {list(losses)}")
    params, x = inputs(cfg)
    steps = {name: jax.value_and_grad(losses[name]) for name in names}
    times: dict[str, Timing] = {}
    if time:  # compiled first, then timed in turns, so that each meets the same load
        from examples.tools.measure import time_interleaved

        compiled = {n: jax.jit(step).lower(params, x).compile() for n, step in steps.items()}
        times = time_interleaved(compiled, params, x, repeats=repeats)
    rows = []
    for name in names:
        stats = stats_of(compiled[name]) if time else compiled_stats(steps[name], params, x)
        kept = saved_residuals(losses[name], params, x).excluding_arguments().nbytes
        rows.append(Row(name, kept, stats.temp_bytes, stats.flops, times.get(name)))
    return rows


def by_name(rows: Sequence[Row]) -> dict[str, Row]:
    return {row.name: row for row in rows}


def table(rows: Sequence[Row], baseline: str = "no checkpoint") -> Table:
    """The rows side by side; FLOPs relative to ``baseline``; times where they were taken."""
    base = by_name(rows)[baseline]
    timed = any(r.timing is not None for r in rows)
    header = ["variant", "kept for the backward pass", "compiled temp memory", "FLOPs"]
    header += ["step time (CPU)"] if timed else []
    body = []
    for row in rows:
        cells = [
            row.name,
            format_bytes(row.kept_bytes),
            format_bytes(row.temp_bytes),
            format_ratio(row.flops, base.flops),
        ]
        if timed:
            cells.append(str(row.timing) if row.timing else "not timed")
        body.append(cells)
    return Table(header, body)


def relation(a: float, b: float) -> str:
    """``a`` against ``b`` in words: ``"the same as"``, ``"1.80× as much as"``, ..."""
    if a == b:
        return "the same as"
    return f"{a / b:.2f}× as much as"


def time_verdict(timing: Timing, base: Timing) -> str:
    """``"faster than"``, ``"slower than"`` or ``"within the noise of"``: ``timing`` against
    ``base``, an ordering only where their ranges do not overlap (:meth:`Timing.compare`)."""
    verdict = timing.compare(base)
    return "within the noise of" if verdict == "within the noise" else f"{verdict} than"


# --- gradients ------------------------------------------------------------------------------------


def gradient_differences(names: Sequence[str], cfg: Config) -> dict[str, float]:
    """Largest absolute difference between each variant's gradient and the one without remat."""
    losses = variants(cfg)
    params, x = inputs(cfg)
    reference = jax.jit(jax.grad(losses["no checkpoint"]))(params, x)
    out = {}
    for name in names:
        grads = jax.jit(jax.grad(losses[name]))(params, x)
        diffs = jax.tree.map(lambda a, b: jnp.max(jnp.abs(a - b)), grads, reference)
        out[name] = float(max(jax.tree.leaves(diffs)))
    return out


# --- static arguments -----------------------------------------------------------------------------


def scaled_block(h: jax.Array, p: Any, train: bool) -> jax.Array:
    """A block whose Python flag chooses the computation (as dropout's ``train`` does)."""
    out = block(h, p, heads=CONFIG.heads)
    if train:  # a Python `if`: needs a Python bool, not a traced one
        out = out * 0.9
    return out


def position_scaled(h: jax.Array, length: int) -> jax.Array:
    """Scale each position by its index: ``jnp.arange`` needs ``length`` as a Python int."""
    return h * jnp.arange(length)[:, None] / length


# --- an unrolled checkpointed scan ----------------------------------------------------------------


def unrolled_loss(cfg: Config, unroll: int, policy: Any = None, prevent_cse: bool = True) -> Loss:
    """The scan over layers with ``unroll`` layers per loop iteration; each layer checkpointed
    with ``policy`` and ``prevent_cse``, or not checkpointed where ``policy`` is None."""
    one = layer(cfg)
    body = one if policy is None else jax.checkpoint(one, policy=policy, prevent_cse=prevent_cse)

    def loss(params: Any, x: jax.Array) -> jax.Array:
        h, _ = jax.lax.scan(lambda h, p: (body(h, p), None), x, params, unroll=unroll)
        return jnp.mean(h**2)

    return loss


#: The three steps compared at each unroll factor.
UNROLLED = {
    "no checkpoint": {},
    "nothing_saveable": {"policy": P.nothing_saveable},
    "nothing_saveable, prevent_cse=False": {"policy": P.nothing_saveable, "prevent_cse": False},
}


def measure_unrolled(
    cfg: Config = CONFIG, unrolls: Sequence[int] = (1, 2, CONFIG.layers)
) -> dict[int, dict[str, int]]:
    """Compiled temporary bytes of each of :data:`UNROLLED`'s steps at each unroll factor."""
    params, x = inputs(cfg)
    return {
        unroll: {
            name: compiled_stats(
                jax.value_and_grad(unrolled_loss(cfg, unroll, **kw)), params, x
            ).temp_bytes
            for name, kw in UNROLLED.items()
        }
        for unroll in unrolls
    }


def unrolled_table(temps: dict[int, dict[str, int]], cfg: Config = CONFIG) -> Table:
    header = ["layers per loop iteration (`unroll`)", *(f"`{n}`" for n in UNROLLED)]
    body = [
        [f"{u} (the whole stack)" if u == cfg.layers else str(u)]
        + [format_bytes(t[n]) for n in UNROLLED]
        for u, t in temps.items()
    ]
    return Table(header, body)
