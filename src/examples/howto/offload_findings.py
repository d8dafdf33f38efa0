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
    rates = [r for run in shown for r in copy_rates(run).values()]
    if shown and rates and all(_offload_always_slower(run) for run in shown):
        low, high = min(rates), max(rates)
        parts.append(
            f"Each offload's extra step time is the bytes it copies to the host and back divided "
            f"by {low / 1e9:.0f} to {high / 1e9:.0f} GB/s, about the rate of a PCIe host link. "
            "So the "
            "step took its compute plus the copies: the copies did not overlap with compute at "
            "all. Offload pays only where they do, and only where the bytes moved cost less link "
            "time than their recomputation costs. Divide the bytes by your link's rate, then "
            "measure your own step before choosing offload over recomputation."
        )
    return Markdown("\n\n".join(parts))


def copy_rates(run: Run) -> dict[str, float]:
    """For each offloading policy of ``run`` that steps slower than its on-device twin: the bytes
    it copies to the host and back per step, divided by its extra step time (bytes per second).
    A rate near the host link's means the copies were added to the step, not hidden behind it."""
    rates = {}
    for o, twin in _pairs(run):
        if o.timing is None or twin.timing is None or o.timing.compare(twin.timing) != "slower":
            continue
        moved = o.to_host_bytes + o.to_device_bytes
        if moved:
            rates[o.policy] = moved / (o.timing.median_s - twin.timing.median_s)
    return rates


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
    rates = copy_rates(run)
    for o, twin in _pairs(run):
        line = f"- `{o.policy}`, {_against(o, twin)}"
        if o.policy in rates:
            line += (
                f"; the extra step time is what copying {format_bytes(o.to_host_bytes)} to the "
                f"host and {format_bytes(o.to_device_bytes)} back takes at "
                f"{rates[o.policy] / 1e9:.0f} GB/s"
            )
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
