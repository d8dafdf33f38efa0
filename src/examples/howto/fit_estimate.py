"""How-to "Will it fit?": a time estimate, labelled as one.

A plan holds no time. :func:`roofline_seconds` is the floor a step's matrix products set at a
device's published dense peak (:data:`PEAKS`); :func:`estimate_table` applies it to a record's
plans, and :func:`explorer_estimates` sets it beside the step times the explorer measured on a
real GPU, so that a reader sees how far such an estimate is from a run.
"""

from __future__ import annotations

from typing import Any

import jax

from examples.howto.fit import Record, fits_only_through_xla, program_flops, verdict
from examples.tools.display import Table
from examples.tools.plan_flops import step_flops


def _tflops(x: float) -> str:
    return f"{x / 1e12:,.1f}"


#: Published dense peak rates per device: (FLOP/s for bfloat16 matmuls, FLOP/s for float32 matmuls
#: as XLA runs them by default, HBM bytes/s, source).
PEAKS: dict[str, tuple[float, float, float, str]] = {
    "NVIDIA H100 80GB HBM3": (989e12, 494.5e12, 3.35e12, "NVIDIA H100 SXM data sheet (dense)"),
    "NVIDIA H200": (989e12, 494.5e12, 4.8e12, "NVIDIA H200 SXM data sheet (dense)"),
    "NVIDIA A100-SXM4-80GB": (312e12, 156e12, 2.039e12, "NVIDIA A100 data sheet (dense)"),
    "TPU v5 lite": (197e12, 197e12, 819e9, "Google Cloud TPU v5e documentation"),
    "TPU v6 lite": (918e12, 918e12, 1640e9, "Google Cloud TPU v6e documentation"),
    "TPU v5": (459e12, 459e12, 2765e9, "Google Cloud TPU v5p documentation"),
}


def peaks_for(device_kind: str) -> tuple[float, float, float, str]:
    for kind, peaks in PEAKS.items():
        if device_kind.startswith(kind):
            return peaks
    raise KeyError(f"no published peak rates for {device_kind!r}")


def roofline_seconds(flops: float, device_kind: str, dtype: str = "bfloat16") -> float:
    """The time of ``flops`` matmul FLOPs on one device at its published dense peak: a lower
    bound on a step's time (memory traffic, communication and other work not counted)."""
    bf16, f32, _bw, _ = peaks_for(device_kind)
    return flops / (bf16 if dtype == "bfloat16" else f32)


def estimate_table(rec: Record) -> Table:
    """Per policy at the record's batch: the compute-bound time estimate of one step."""
    cfg, rows = rec.config, []
    kind = rec.target["device_kind"]
    for p in rec.plans:
        step = program_flops(cfg, p.label) * rec.batch
        rows.append(
            [
                f"`{p.label}`",
                _tflops(step),
                f"{roofline_seconds(step, kind) * 1e3:,.0f} ms",
                verdict(p, rec, rec.batch),
            ]
        )
    _, _, _, where = peaks_for(kind)
    return Table(["policy", "TFLOPs per step per device", "estimate at peak", "plan"], rows,
                 caption=f"Estimate, not a measurement: {rec.target['name']}, the "
                         f"{cfg.name.upper()} model at {rec.batch} sequences per device; "
                         f"matmul FLOPs over the bfloat16 dense peak ({where})")  # fmt: skip


def estimate_verdict_line(rec: Record) -> str:
    """One line: of the plans that fit the budget, the one with the shortest estimate."""
    fitting = [p for p in rec.plans if p.fits and not fits_only_through_xla(rec, p, rec.batch)]
    if not fitting:
        return "**Verdict:** no plan here fits within the budget."
    best = min(fitting, key=lambda p: (program_flops(rec.config, p.label), p.label))
    step = program_flops(rec.config, best.label) * rec.batch
    ms = roofline_seconds(step, rec.target["device_kind"]) * 1e3
    return (
        f"**Verdict:** of the plans within the budget, `{best.label}` asks for the least work: "
        f"at least {ms:,.0f} ms a step at peak."
    )


def explorer_estimates(run: Any) -> Table:
    """The explorer's measured step times on a GPU beside the same step's compute-bound
    estimate (its float32 matmuls at the GPU's float32 dense peak, as XLA runs them)."""
    from examples.explorer import model as em
    from examples.tools.models import init_inputs, init_params

    cfg = run.config
    args = jax.eval_shape(lambda: (init_params(cfg), init_inputs(cfg)))
    kind = run.runinfo["device"]
    rows = []
    for r in run.results:
        if r.policy not in em.POLICIES or r.step_time_s is None:
            continue
        flops = step_flops(jax.grad(em.make_loss(cfg, em.POLICIES[r.policy])), *args)
        est = roofline_seconds(flops, kind, "float32")
        rows.append(
            [
                f"`{r.policy}`",
                f"{flops / 1e12:,.2f}",
                f"{est * 1e3:,.1f} ms",
                f"{r.step_time_s * 1e3:,.1f} ms",
                f"{est / r.step_time_s:.0%}",
            ]
        )
    _, _, _, where = peaks_for(kind)
    return Table(["policy", "TFLOPs per step", "estimate at peak", "measured",
                  "estimate / measured"], rows,
                 caption=f"Estimate beside measurement: the explorer's gradient on one {kind} "
                         f"(jax {run.runinfo['jax']}); the estimate is its float32 matmul FLOPs "
                         f"at the float32 (TF32) dense peak ({where})")  # fmt: skip
