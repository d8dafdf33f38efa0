"""What the two Flax how-to guides share: the sizes, the batch, and how a step's cost is shown.

The linen guide (:mod:`examples.howto.linen_training`) and the NNX guide
(:mod:`examples.howto.nnx_training`) train the same transformer on the same batch, and measure
each training step into a :class:`Measured` record, shown by :func:`measured_table` and turned
into the prose's figures by :func:`step_facts`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.measure import CompiledStats
from examples.tools.models import Config
from examples.tutorial.compiled import relation

#: The model of the guides: small enough that each compile takes a few seconds on a CPU.
CONFIG = Config(layers=4, batch=4, seq=64, width=128, heads=4)
VOCAB = 256
DROPOUT = 0.1

Batch = dict[str, jax.Array]


def make_batch(cfg: Config = CONFIG, vocab: int = VOCAB, seed: int = 0) -> Batch:
    """Random tokens, and as targets the same tokens shifted by one (next-token prediction)."""
    tokens = jax.random.randint(jax.random.key(seed), (cfg.batch, cfg.seq), 0, vocab)
    return {"tokens": tokens, "targets": jnp.roll(tokens, -1, axis=1)}


@dataclasses.dataclass(frozen=True)
class Measured:
    """What one model's training step costs: XLA's compiled figures, JAX's residuals.

    ``step`` is ``None`` where the step was not compiled; ``residual_bytes`` is ``None``
    where the residuals were not listed.
    """

    name: str
    step: CompiledStats | None  #: the compiled training step; ``None`` where not compiled
    residual_bytes: int | None = None  #: what autodiff keeps, arguments excluded


def measured_table(rows: Sequence[Measured], flops: bool = True) -> Table:
    """Residuals, XLA's temporary memory and FLOPs, each against the first row, where measured.

    Leave the FLOPs out (``flops=False``) where rows mix scans with unrolled steps: XLA's cost
    analysis counts a loop's body once. A figure a row lacks shows as a dash.
    """
    first = rows[0]
    columns: list[tuple[str, Callable[[Measured], float | None]]] = []
    if first.residual_bytes is not None:
        columns.append(("residuals kept", lambda m: m.residual_bytes))
    if first.step is not None:
        columns.append(("XLA temp memory", lambda m: m.step.temp_bytes if m.step else None))
        if flops:
            columns.append(("XLA FLOPs", lambda m: m.step.flops if m.step else None))
    header = ["model"] + [h for name, _ in columns for h in (name, "vs first")]

    def cells(name: str, value: float | None, base: float | None) -> tuple[str, str]:
        if value is None:
            return "—", "—"
        shown = f"{value / 1e9:.2f} G" if name == "XLA FLOPs" else format_bytes(value)
        return shown, format_ratio(value, base)

    rows_out = [
        [f"`{m.name}`", *(c for name, get in columns for c in cells(name, get(m), get(first)))]
        for m in rows
    ]
    return Table(header, rows_out)


def step_facts(plain: Measured, remat: Measured, prefix: str) -> dict[str, Any]:
    """Figures and verdicts for the page's prose: one model without and with remat."""
    if plain.step is None or remat.step is None:
        raise ValueError("step_facts needs both models' compiled steps (measure with compile=True)")
    temp, base = remat.step.temp_bytes, plain.step.temp_bytes
    facts: dict[str, Any] = {
        "plain_temp": format_bytes(base),
        "remat_temp": format_bytes(temp),
        "temp_relation": relation(temp, base),
        "temp_ratio": temp / base,
    }
    if plain.residual_bytes and remat.residual_bytes:
        facts["plain_res"] = format_bytes(plain.residual_bytes)
        facts["remat_res"] = format_bytes(remat.residual_bytes)
        facts["res_ratio"] = remat.residual_bytes / plain.residual_bytes
    if plain.step.flops and remat.step.flops:
        facts["flops_ratio"] = remat.step.flops / plain.step.flops
        facts["memory_verdict"] = (
            "XLA compiled the recomputation (the FLOPs went up) but the program's temporary "
            "memory did not go down"
            if temp >= base
            else "XLA compiled the recomputation and the program's temporary memory went down"
        )
    return {f"{prefix}_{key}": value for key, value in facts.items()}


def losses_table(losses: dict[str, list[float]]) -> Table:
    names = list(losses)
    rows = [(i + 1, *(f"{losses[n][i]:.6f}" for n in names)) for i in range(len(losses[names[0]]))]
    return Table(["step", *(f"loss, `{n}`" for n in names)], rows)


#: How far two runs' float32 losses may differ and still count as the same training: the plain
#: step and the checkpointed one are two programs, and XLA may round them apart by a unit in the
#: last place (jax 0.5.0 at LLVM level 0 on an AVX-512 AMD EPYC: 3.4017353 against 3.4017351).
#: A dropout mask drawn anew in the recomputation moves the second step's loss by about 3e-3.
LOSS_RTOL = 1e-6


def losses_verdict(losses: dict[str, list[float]]) -> str:
    """Whether runs' losses agree at every step: bit for bit, to float32 rounding
    (:data:`LOSS_RTOL`), or not (then the table shows where)."""
    runs = list(losses.values())
    if all(run == runs[0] for run in runs):
        return "identical at every step"
    if all(
        len(run) == len(runs[0])
        and all(abs(a - b) <= LOSS_RTOL * abs(b) for a, b in zip(run, runs[0], strict=True))
        for run in runs
    ):
        return "equal to float32 rounding at every step (XLA rounds the two programs apart)"
    return "different (see the table)"


def barrier_facts(
    plain: Measured, remat: Measured, no_barrier: Measured, prefix: str
) -> dict[str, str]:
    """What the optimization barrier did in a Python loop of blocks, read off three compiled
    steps: without remat, remat with ``prevent_cse=True`` (the default), and remat without it.

    The outcome is the XLA release's (whether its passes still see the barrier when they decide
    where the recomputation goes), so it is measured, never assumed.
    """
    if plain.step is None or remat.step is None or no_barrier.step is None:
        raise ValueError("barrier_facts needs the three compiled steps (measure with compile=True)")
    base, kept, bare = plain.step.temp_bytes, remat.step.temp_bytes, no_barrier.step.temp_bytes
    if kept < base and bare >= base:
        verdict = (
            "with the barrier the temporaries went down, and without it they did not: here "
            "the barrier is what kept the recomputation away from the forward pass"
        )
    elif kept < base:
        verdict = "the temporaries went down with the barrier and without it"
    elif bare < base:
        verdict = "the temporaries went down only without the barrier"
    else:
        verdict = (
            "the temporaries did not go down, with the barrier or without: on this release the "
            "barrier did not keep the recomputation apart"
        )
    return {
        f"{prefix}_barrier_verdict": verdict,
        f"{prefix}_no_barrier_temp": format_bytes(bare),
    }


def max_abs_difference(a: Any, b: Any) -> float:
    """The largest absolute difference between two pytrees of arrays of one structure."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in pairs)
