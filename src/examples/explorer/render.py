"""The explorer's tables, verdicts and plots.

Tables are :class:`examples.tools.display.Table`. Step times are shown as a median with the fastest
and slowest call, and any ordering in prose comes from :func:`timing_verdicts` /
:func:`ordering_sentence`, which call one time faster than another only where their ranges do not
overlap. A run that recorded medians alone (schema version 1) is marked as such and orders
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from examples.explorer.data import DepthPoint, Result, Run
from examples.explorer.model import NO_REMAT, POLICIES
from examples.explorer.run import BarrierCost
from examples.explorer.theory import counted_share
from examples.reference.policies import relation
from examples.tools.display import Table, format_bytes, format_ratio, format_seconds
from examples.tools.models import Config
from examples.tools.residuals import Residuals

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MEDIAN_ONLY = "median only; spread not recorded"
FLOPS = "FLOPs vs. no remat"
#: The FLOPs column's heading where XLA's count leaves out the products with the weights.
FLOPS_WITHOUT_PRODUCTS = (
    "FLOPs vs. no remat (XLA's partial count: the weight products handed to cuBLAS left out, "
    "attention products in; not a measure of recomputation)"
)


def step_time(result: Result) -> str:
    """``"12.1 ms (11.8–13.0 ms)"``, or the median marked as the only figure recorded."""
    if result.step_time_s is None:
        return "n/a"
    if result.timing is None:
        return f"{format_seconds(result.step_time_s)} ({MEDIAN_ONLY})"
    return f"{format_seconds(result.step_time_s)} ({result.timing.spread})"


def flops_heading(cfg: Config | None, results: Sequence[Result]) -> str:
    """The FLOPs column's heading: marked where XLA's count misses the products of ``cfg``."""
    if cfg is None or not any(r.policy == NO_REMAT and r.flops for r in results):
        return FLOPS
    return FLOPS if counted_share(cfg, results).counts_products else FLOPS_WITHOUT_PRODUCTS


def results_table(
    results: Sequence[Result],
    cfg: Config | None = None,
    kept: str = "kept per layer",
    flops: str | None = None,
) -> Table:
    """One row per policy; ratios are against the "no remat" row, if present.

    ``cfg`` (the model measured) lets the FLOPs column say when XLA's count leaves out the
    products; ``flops`` overrides its heading.
    """
    base = next((r for r in results if r.policy == NO_REMAT), None)
    header = [
        "policy",
        kept,
        "temp memory",
        "host memory",
        flops or flops_heading(cfg, results),
        "step time: median (fastest–slowest)",
    ]
    rows = [
        [
            r.policy,
            format_bytes(r.residual_bytes_per_layer),
            format_bytes(r.temp_bytes),
            "n/a" if r.host_temp_bytes is None else format_bytes(r.host_temp_bytes),
            format_ratio(r.flops, base.flops if base else None),
            step_time(r),
        ]
        for r in results
    ]
    return Table(header, rows)


def offload_report(results: Sequence[Result]) -> str:
    """For each offload policy: the bytes XLA placed in host memory, and what that means."""
    lines = []
    for r in results:
        if "offload" in r.policy:
            moved = r.host_temp_bytes or 0
            verdict = "moved to the host" if moved else "nothing moved"
            lines.append(f"{r.policy}\n    {format_bytes(moved)} in host memory: {verdict}")
    return "\n".join(lines)


def exclusion_table(listings: dict[str, Residuals]) -> Table:
    """Values kept, their bytes and the names among them, one row per policy."""
    rows = [
        [
            f"`{label}`",
            len(kept),
            format_bytes(kept.nbytes),
            ", ".join(r.name for r in kept.of_kind("named") if r.name is not None) or "none",
        ]
        for label, kept in listings.items()
    ]
    header = ["policy", "values kept", "bytes", "named values kept"]
    return Table(header, rows, align=["left", "right", "right", "left"])


def barrier_table(costs: Sequence[BarrierCost], no_remat_temp_bytes: int) -> Table:
    """Each policy's compiled temporary memory with JAX's default ``prevent_cse=True`` and
    without it, against no remat, and whether the FLOPs change."""
    rows = [
        [
            f"`{c.policy}`",
            format_bytes(c.temp_bytes),
            format_bytes(c.temp_bytes_without),
            format_bytes(c.temp_bytes - c.temp_bytes_without),
            format_ratio(c.flops_without, c.flops),
        ]
        for c in costs
    ]
    header = [
        "policy",
        "temp memory, prevent_cse=True",
        "prevent_cse=False",
        "the barrier's cost",
        "FLOPs, False vs. True",
    ]
    rows.append(["no remat (no checkpoint)", format_bytes(no_remat_temp_bytes), "", "", ""])
    return Table(header, rows, align=["left", "right", "right", "right", "right"])


# --- verdicts on step times ---------------------------------------------------------------------


def timing_verdicts(results: Sequence[Result], against: str = NO_REMAT) -> dict[str, str] | None:
    """policy -> ``"faster"``, ``"slower"`` or ``"within the noise"`` against ``against``.

    ``None`` where the run recorded no spread (or did not time ``against``): then no verdict
    can be given.
    """
    rows = {r.policy: r for r in results}
    base = rows[against].timing if against in rows else None
    if base is None:
        return None
    return {
        r.policy: r.timing.compare(base)
        for r in results
        if r.policy != against and r.timing is not None
    }


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names) if names else "none"


def ordering_sentence(results: Sequence[Result], against: str = NO_REMAT) -> str:
    """The step times against ``against`` as a sentence that claims only what the data shows."""
    verdicts = timing_verdicts(results, against)
    if verdicts is None:
        return (
            "This run recorded median step times only, without their spread, so it cannot tell "
            "a difference from noise: no policy is called faster or slower than another from it."
        )
    groups = {v: [n for n, w in verdicts.items() if w == v] for v in ("faster", "slower")}
    noise = [n for n, w in verdicts.items() if w == "within the noise"]
    if not groups["faster"] and not groups["slower"]:
        return (
            f"Against `{against}`, the ranges of timed calls overlap for every policy: this "
            "machine cannot tell their step times apart."
        )
    return (
        f"Against `{against}`, with an ordering claimed only where the ranges of timed calls do "
        f"not overlap: faster: {_names(groups['faster'])}; slower: {_names(groups['slower'])}; "
        f"within the noise: {len(noise)} of {len(verdicts)} policies."
    )


def under_budget(
    results: Sequence[Result], budget_bytes: int
) -> tuple[list[Result], Result | None]:
    """The policies whose temp memory fits ``budget_bytes``, and the clearly fastest of them.

    The fastest is returned only if its slowest call beats the fastest call of every other
    policy that fits; otherwise ``None``: time does not decide between them.
    """
    timed = [
        (r, t) for r in results if (t := r.timing) is not None and r.temp_bytes <= budget_bytes
    ]
    fits = [r for r, _ in timed]
    for r, t in timed:
        if all(t.compare(other) == "faster" for o, other in timed if o is not r):
            return fits, r
    return fits, None


def budget_sentence(results: Sequence[Result], budget_bytes: int) -> str:
    """What the step times say about choosing among the policies that fit a memory budget."""
    if any(r.timing is None for r in results if r.step_time_s is not None):
        return "Without a recorded spread, this run's step times cannot choose a policy."
    fits, fastest = under_budget(results, budget_bytes)
    if not fits:
        return f"No measured policy fits in {format_bytes(budget_bytes)}."
    if len(fits) == 1:
        return f"Only `{fits[0].policy}` fits in {format_bytes(budget_bytes)}."
    head = f"{len(fits)} policies fit in {format_bytes(budget_bytes)}"
    if fastest is not None:
        return f"{head}, and `{fastest.policy}` is faster than each of the others beyond the noise."
    return (
        f"{head}, and no one of them is faster than all the others beyond the noise: among "
        "them, choose by memory headroom or FLOPs, not by these step times."
    )


# --- depth ----------------------------------------------------------------------------------------


def growth_per_layer(points: Sequence[DepthPoint]) -> dict[str, float]:
    """policy -> bytes of temp memory added per layer, between the shallowest and deepest run."""
    out = {}
    for name in dict.fromkeys(p.policy for p in points):
        mine = sorted((p.layers, p.temp_bytes) for p in points if p.policy == name)
        (l0, t0), (l1, t1) = mine[0], mine[-1]
        out[name] = (t1 - t0) / (l1 - l0)
    return out


def growth_table(points: Sequence[DepthPoint], results: Sequence[Result]) -> Table:
    """Growth of temp memory per layer next to what one block keeps (the "kept per layer")."""
    kept = {r.policy: r.residual_bytes_per_layer for r in results}
    rows = [
        [name, format_bytes(growth), format_bytes(kept[name]) if name in kept else "n/a"]
        for name, growth in growth_per_layer(points).items()
    ]
    return Table(["policy", "temp memory added per layer", "kept per layer"], rows)


# --- plots ----------------------------------------------------------------------------------------

_MARKERS = "osD^vP*Xhp<>"
# Twelve colours that stay apart, one per measured policy (matplotlib's default cycle has ten).
_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8",
)  # fmt: skip


def _style(policy: str, order: Sequence[str]) -> dict[str, Any]:
    """The same colour and marker for a policy in every panel and figure."""
    i = order.index(policy) if policy in order else len(order) + sum(map(ord, policy))
    return {"color": _COLOURS[i % len(_COLOURS)], "marker": _MARKERS[i % len(_MARKERS)]}


def _bytes_axis(values: Sequence[int]) -> tuple[float, str]:
    """A scale and unit that keep the axis numbers readable (MiB, or GiB for large runs)."""
    return (2**30, "GiB") if max(values, default=0) >= 4 * 2**30 else (2**20, "MiB")


def _tidy(ax: Axes, title: str, unit: str) -> None:
    ax.set_ylabel(f"XLA temporary memory ({unit})")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)


def plot_tradeoff(runs: Sequence[tuple[str, Sequence[Result]]]) -> Figure:
    """Compiled temporary memory against step time: one panel per run, one marker per policy.

    A horizontal bar runs from the fastest to the slowest timed call; a run that recorded the
    median alone has no bars, and its title says so. Markers are hollow and differ in shape,
    so policies that land on the same point stay visible on top of each other.
    """
    import matplotlib.pyplot as plt

    order = list(POLICIES) + [r.policy for _, rs in runs for r in rs if r.policy not in POLICIES]
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(7.5, 3.6 * len(runs) + 1.3), layout="constrained", squeeze=False
    )
    # ErrorbarContainers; Any because matplotlib's stubs type legend handles as Artists only.
    shown: dict[str, Any] = {}
    for ax, (title, results) in zip(axes[:, 0], runs, strict=True):
        timed = [(r, median) for r in results if (median := r.step_time_s) is not None]
        scale, unit = _bytes_axis([r.temp_bytes for r, _ in timed])
        for r, median in timed:
            style = _style(r.policy, order)
            t = r.timing
            # In milliseconds, like the x axis: from the fastest call to the slowest.
            xerr = (
                None
                if t is None
                else [[(t.median_s - t.min_s) * 1e3], [(t.max_s - t.median_s) * 1e3]]
            )
            shown[r.policy] = ax.errorbar(
                median * 1e3,
                r.temp_bytes / scale,
                xerr=xerr,
                fmt=style["marker"],
                markersize=9,
                mfc="none",
                mec=style["color"],
                mew=1.8,
                ecolor=style["color"],
                elinewidth=1.2,
                capsize=3,
            )
        if any(r.timing is None for r, _ in timed):
            title = f"{title}\n({MEDIAN_ONLY}: no error bars, no ordering)"
        ax.set_xlabel("step time of jit(grad(loss)) (ms): median, bar from fastest to slowest")
        _tidy(ax, title, unit)
    fig.legend(
        list(shown.values()), list(shown), loc="outside lower center", ncol=2, fontsize=8,
        frameon=False,
    )  # fmt: skip
    return fig


def plot_depth(runs: Sequence[tuple[str, Sequence[DepthPoint]]]) -> Figure:
    """Compiled temporary memory against the number of layers: one panel per run.

    The x axis is linear, so memory that grows by a fixed amount per layer draws a straight line.
    """
    import matplotlib.pyplot as plt

    runs = [(title, points) for title, points in runs if points]
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(7.5, 3.4 * len(runs)), layout="constrained", squeeze=False
    )
    order = list(POLICIES)
    for ax, (title, points) in zip(axes[:, 0], runs, strict=True):
        scale, unit = _bytes_axis([p.temp_bytes for p in points])
        for name in dict.fromkeys(p.policy for p in points):
            mine = sorted((p.layers, p.temp_bytes) for p in points if p.policy == name)
            style = _style(name, order)
            ax.plot(
                [n for n, _ in mine],
                [t / scale for _, t in mine],
                label=name,
                color=style["color"],
                marker=style["marker"],
            )
        ax.set_xticks(sorted({p.layers for p in points}))
        ax.set_xlabel("layers")
        ax.legend(fontsize=8, frameon=False)
        _tidy(ax, title, unit)
    return fig


def everything_saveable_on(run: Run) -> str:
    """What a committed explorer run (:class:`~examples.explorer.data.Run`) says of
    ``everything_saveable`` against no checkpoint, as a sentence: its compiled memory, and its
    step time ordered only where the run recorded spreads that do not overlap."""
    rows = {r.policy: r for r in run.results}
    base, every = rows[NO_REMAT], rows["everything_saveable"]
    more = relation(every.temp_bytes, base.temp_bytes)
    memory = (
        f"On {run.label()}, `everything_saveable` needed {more} the compiled memory of no "
        f"checkpoint ({every.temp_bytes / base.temp_bytes:.2f} times)"
    )
    if every.timing is None or base.timing is None:
        if every.step_time_s is None or base.step_time_s is None:
            return f"{memory}; that run did not time both."
        higher = "higher" if every.step_time_s > base.step_time_s else "not higher"
        return (
            f"{memory}. Its median step time was {higher}, but that run recorded no spread of its "
            "timings, so this page does not call it slower."
        )
    verdict = every.timing.compare(base.timing)
    if verdict == "within the noise":
        return f"{memory}, and its step was within the noise of no checkpoint's."
    return (
        f"{memory}, and its step was {verdict}: {every.timing} against {base.timing} (the ranges "
        "of timed calls do not overlap)."
    )
