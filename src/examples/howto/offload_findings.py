"""What a recorded host-offload run says, in sentences (the sharded-step guide's GPU section).

Each offloading policy against its twin that keeps the same values on the device, and against
recomputing everything (``nothing_saveable``): device memory, and step times ordered only where
the ranges of the timed steps do not overlap (:meth:`~examples.tools.measure.Timing.compare`).
"""

from __future__ import annotations

from collections.abc import Sequence

from examples.howto.offload import ON_DEVICE, Markdown, Result, Run, accelerator_runs
from examples.tools.display import format_bytes, format_seconds


def _against(a: Result, b: Result) -> str:
    """Device memory and step time of ``a`` against ``b``: an order is claimed only where the
    ranges of their timed steps do not overlap (:meth:`Timing.compare`)."""
    ta, tb = a.timing, b.timing
    text = f"against `{b.policy}`: {format_bytes(a.temp_bytes)} of device memory instead of "
    text += format_bytes(b.temp_bytes)
    if ta is None or tb is None:
        return text + " (not timed)"
    medians = f"{format_seconds(ta.median_s)} against {format_seconds(tb.median_s)}"
    verdict = ta.compare(tb)
    if verdict == "within the noise":
        return text + f", and a step within the noise of it ({medians}, medians)"
    ratio = ta.median_s / tb.median_s if verdict == "slower" else tb.median_s / ta.median_s
    return text + (
        f", and a step {ratio:.2f}× {verdict} ({medians}, medians; the ranges of the timed steps "
        "do not overlap)"
    )


def findings(runs: Sequence[Run]) -> Markdown:
    """What each accelerator run says of each offloading policy, in sentences: against its twin
    that keeps the same values on the device, and against recomputing everything
    (nothing_saveable). Empty where no accelerator run is committed."""
    shown = accelerator_runs(runs)
    parts = [_findings(run) for run in shown]
    if shown and all(_offload_always_slower(run) for run in shown):
        parts.append(
            "Each run is one model on one device. The `medium` transformer's layers are short, so "
            "the copies to the host and back have little computation to hide behind, which is the "
            "likeliest reason offload costs time here. A model whose layers compute more per byte "
            "kept may hide them: measure your own step before choosing offload over recomputation."
        )
    return Markdown("\n\n".join(parts))


def _pairs(run: Run) -> list[tuple[Result, Result]]:
    """Each offloading policy of ``run`` with its on-device twin, where the run has both."""
    by_name = {r.policy: r for r in run.results}
    return [(by_name[o], by_name[t]) for o, t in ON_DEVICE.items() if o in by_name and t in by_name]


def _offload_always_slower(run: Run) -> bool:
    """Whether every offloading policy of ``run`` steps slower than its on-device twin."""
    pairs = _pairs(run)
    return bool(pairs) and all(
        o.timing is not None and t.timing is not None and o.timing.compare(t.timing) == "slower"
        for o, t in pairs
    )


def _findings(run: Run) -> str:
    full = next((r for r in run.results if r.policy == "nothing_saveable"), None)
    lines = []
    for o, twin in _pairs(run):
        line = f"- `{o.policy}`, {_against(o, twin)}"
        if full is not None:
            line += f"; {_against(o, full)}"
            if (
                full.temp_bytes <= o.temp_bytes
                and o.timing is not None
                and full.timing is not None
                and full.timing.compare(o.timing) == "faster"
            ):
                line += (
                    ". Recomputing everything reached as little device memory, and faster: on "
                    "this model and device this offload buys nothing"
                )
        lines.append(line + ".")
    return f"On the {run.label()}:\n\n" + "\n".join(lines)
