"""What each checkpoint policy costs on a stack of transformer blocks, measured.

For every policy: bytes of residuals one block keeps, XLA's compiled memory and FLOPs for one
gradient of the whole stack, and the step time of ``jax.jit(jax.grad(loss))``. The same code
runs at any size; ``python -m examples.explorer --size medium --out FILE.json`` writes the results
with the device, backend and versions, so runs on other machines can be committed under
``docs/explorer/data/`` and shown beside the page's own run.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import html
import inspect
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.measure import MIN_REPEATS, compiled_stats, format_seconds, time_call
from examples.models import SIZES, Config, block, init_inputs, init_params, scan_loss
from examples.residuals import format_bytes, saved_residuals
from examples.runinfo import collect

SCHEMA = "jax-remat-guide/explorer/1"
P = jax.checkpoint_policies

# --- the model (examples.models), checkpointed ------------------------------------------------


NO_REMAT = "no remat"

#: The policies measured on the page: name -> policy (``None`` for no ``jax.checkpoint``).
POLICIES: dict[str, Any] = {
    NO_REMAT: None,
    "everything_saveable": P.everything_saveable,
    "dots_saveable": P.dots_saveable,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "save_only_these_names(mlp_hidden)": P.save_only_these_names("mlp_hidden"),
    "save_anything_except_these_names(attn_logits)": P.save_anything_except_these_names(
        "attn_logits"
    ),
    "save_any_names_but_these(attn_logits)": P.save_any_names_but_these("attn_logits"),
    "save_from_both_policies(no-batch dots, mlp_hidden)": P.save_from_both_policies(
        P.dots_with_no_batch_dims_saveable, P.save_only_these_names("mlp_hidden")
    ),
    "save_and_offload_only_these_names(offload mlp_hidden)": P.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["mlp_hidden"],
        offload_src="device",
        offload_dst="pinned_host",
    ),
    "offload_dot_with_no_batch_dims(pinned_host)": P.offload_dot_with_no_batch_dims(
        "device", "pinned_host"
    ),
    "nothing_saveable": P.nothing_saveable,
}
#: The policies that ask to move residuals to host memory. Every backend compiles them; whether
#: anything moves shows in ``host_temp_bytes`` (zero where the backend keeps it all in one place).
OFFLOAD_POLICIES = (
    "save_and_offload_only_these_names(offload mlp_hidden)",
    "offload_dot_with_no_batch_dims(pinned_host)",
)
#: Names in ``jax.checkpoint_policies`` that are the same object as a measured policy.
ALIASES = {
    "checkpoint_dots": "dots_saveable",
    "checkpoint_dots_with_no_batch_dims": "dots_with_no_batch_dims_saveable",
}


def layer_fn(cfg: Config, policy: Any) -> Callable[[jax.Array, dict[str, jax.Array]], jax.Array]:
    fn = lambda h, p: block(h, p, cfg.heads)
    return fn if policy is None else jax.checkpoint(fn, policy=policy)


def make_loss(cfg: Config, policy: Any) -> Callable[[dict[str, jax.Array], jax.Array], jax.Array]:
    """Scan the (possibly checkpointed) block over the layers; mean square of the output."""
    return scan_loss(layer_fn(cfg, policy))


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


def loss_float64(cfg: Config, params: dict[str, Any], x: Any) -> float:
    """The same loss in NumPy float64, as an independent reference."""
    h = np.asarray(x, np.float64)
    b, s, d = h.shape
    dh = d // cfg.heads

    def norm(t):
        return t / np.sqrt(np.mean(t * t, axis=-1, keepdims=True) + 1e-6)

    def gelu(t):  # jax.nn.gelu's default tanh approximation
        return 0.5 * t * (1 + np.tanh(np.sqrt(2 / np.pi) * (t + 0.044715 * t**3)))

    for i in range(cfg.layers):
        w = {k: np.asarray(v[i], np.float64) for k, v in params.items()}
        q, k, v = np.split(norm(h) @ w["wqkv"], 3, axis=-1)
        q, k, v = (t.reshape(b, s, cfg.heads, dh) for t in (q, k, v))
        logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dh)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        h = h + np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, d) @ w["wo"]
        h = h + gelu(norm(h) @ w["w1"]) @ w["w2"]
    return float(np.mean(h**2))


# --- measurements ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Result:
    policy: str
    residual_bytes_per_layer: int  #: computed by one block and kept (its input excluded)
    temp_bytes: int  #: XLA's temporary memory for one gradient of the whole stack
    argument_bytes: int
    host_temp_bytes: int | None
    flops: float | None
    step_time_s: float | None


def _layer_residual_bytes(cfg: Config, policy: Any, params: dict, x: jax.Array) -> int:
    one_layer = {k: v[0] for k, v in params.items()}
    listing = saved_residuals(layer_fn(cfg, policy), x, one_layer)
    return listing.excluding_arguments().nbytes


def measure(
    cfg: Config,
    policies: Sequence[str] | None = None,
    repeats: int = MIN_REPEATS,
    time_steps: bool = True,
) -> list[Result]:
    """Measure every named policy (all of :data:`POLICIES` by default) on the model ``cfg``."""
    names = list(POLICIES) if policies is None else list(policies)
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise KeyError(f"unknown policies {unknown}; known: {list(POLICIES)}")
    params, x = init_params(cfg), init_inputs(cfg)
    results = []
    for name in names:
        grad = jax.grad(make_loss(cfg, POLICIES[name]))
        stats = compiled_stats(grad, params, x)
        step = time_call(jax.jit(grad), params, x, repeats=repeats) if time_steps else None
        results.append(
            Result(
                policy=name,
                residual_bytes_per_layer=_layer_residual_bytes(cfg, POLICIES[name], params, x),
                temp_bytes=stats.temp_bytes,
                argument_bytes=stats.argument_bytes,
                host_temp_bytes=stats.host_temp_bytes,
                flops=stats.flops,
                step_time_s=None if step is None else step.median_s,
            )
        )
    return results


@dataclasses.dataclass(frozen=True)
class DepthPoint:
    policy: str
    layers: int
    temp_bytes: int


DEPTH_POLICIES = (NO_REMAT, "dots_with_no_batch_dims_saveable", "nothing_saveable")


def depth_sweep(
    cfg: Config, layers: Sequence[int] = (2, 4, 8, 16), policies: Sequence[str] = DEPTH_POLICIES
) -> list[DepthPoint]:
    """Compiled temporary memory against the number of layers (compilation only, no timing)."""
    points = []
    for depth in layers:
        c = dataclasses.replace(cfg, layers=depth)
        params, x = init_params(c), init_inputs(c)
        for name in policies:
            stats = compiled_stats(jax.grad(make_loss(c, POLICIES[name])), params, x)
            points.append(DepthPoint(name, depth, stats.temp_bytes))
    return points


# --- results as data ---------------------------------------------------------------------------


class ExplorerDataError(ValueError):
    """A results file that is not what ``python -m examples.explorer`` writes."""


@dataclasses.dataclass(frozen=True)
class Run:
    runinfo: dict[str, Any]
    config: Config
    results: list[Result]
    depth: list[DepthPoint]

    def label(self) -> str:
        """Device, backend and versions: ``NVIDIA H100 80GB HBM3 (gpu, jax 0.11.2, jaxlib ...)``."""
        info = self.runinfo
        jaxlib = f", jaxlib {info['jaxlib']}" if "jaxlib" in info else ""
        return f"{info['device']} ({info['backend']}, jax {info['jax']}{jaxlib})"

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "runinfo": self.runinfo,
            "config": dataclasses.asdict(self.config),
            "results": [dataclasses.asdict(r) for r in self.results],
            "depth": [dataclasses.asdict(p) for p in self.depth],
        }


def run(
    cfg: Config,
    repeats: int = MIN_REPEATS,
    layers: Sequence[int] = (2, 4, 8, 16),
    policies: Sequence[str] | None = None,
) -> Run:
    """Everything the page shows for one machine: the policy table and the depth sweep."""
    depth_policies = [p for p in DEPTH_POLICIES if policies is None or p in policies]
    return Run(
        collect().as_dict(),
        cfg,
        measure(cfg, policies, repeats=repeats),
        depth_sweep(cfg, layers, depth_policies),
    )


def save(run_: Run, path: str | Path) -> None:
    Path(path).write_text(json.dumps(run_.to_json(), indent=1) + "\n", encoding="utf-8")


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ExplorerDataError(f"{where}: expected an object, found {type(data).__name__}")
    fields = {f.name for f in dataclasses.fields(cls)}
    missing = sorted(fields - set(data))
    if missing:
        raise ExplorerDataError(f"{where}: missing {', '.join(missing)}")
    try:
        return cls(**{k: data[k] for k in fields})
    except (TypeError, ValueError) as err:
        raise ExplorerDataError(f"{where}: {err}") from err


def load(path: str | Path) -> Run:
    """Read a results file, checking its shape; errors name the file and the problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ExplorerDataError(f"{path.name}: not JSON ({err})") from err
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else None
        raise ExplorerDataError(f"{path.name}: schema is {found!r}, expected {SCHEMA!r}")
    for key, kind in (("runinfo", dict), ("results", list), ("depth", list)):
        if not isinstance(data.get(key), kind):
            raise ExplorerDataError(f"{path.name}: '{key}' must be a {kind.__name__}")
    for key in ("device", "backend", "jax"):
        if key not in data["runinfo"]:
            raise ExplorerDataError(f"{path.name}: runinfo lacks '{key}'")
    return Run(
        data["runinfo"],
        _build(Config, data.get("config"), f"{path.name}: config"),
        [_build(Result, r, f"{path.name}: results[{i}]") for i, r in enumerate(data["results"])],
        [_build(DepthPoint, p, f"{path.name}: depth[{i}]") for i, p in enumerate(data["depth"])],
    )


def load_all(folder: str | Path) -> list[Run]:
    return [load(p) for p in sorted(Path(folder).glob("*.json"))]


# --- tables and plots --------------------------------------------------------------------------


_COLUMNS = (
    "policy",
    "kept per layer",
    "temp memory",
    "host memory",
    "FLOPs vs. no remat",
    "step time",
)


def _cells(results: Sequence[Result], kept: str = "kept per layer") -> list[list[str]]:
    base = next((r for r in results if r.policy == NO_REMAT), None)
    rows = [[_COLUMNS[0], kept, *_COLUMNS[2:]]]
    for r in results:
        ratio = f"{r.flops / base.flops:.2f}×" if base and r.flops and base.flops else "n/a"
        host = "n/a" if r.host_temp_bytes is None else format_bytes(r.host_temp_bytes)
        step = format_seconds(r.step_time_s) if r.step_time_s else "n/a"
        rows.append(
            [
                r.policy,
                format_bytes(r.residual_bytes_per_layer),
                format_bytes(r.temp_bytes),
                host,
                ratio,
                step,
            ]
        )
    return rows


def table_markdown(results: Sequence[Result], kept: str = "kept per layer") -> str:
    """The results as a Markdown table; ratios are against the "no remat" row, if present."""
    header, *rows = _cells(results, kept)
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def table_html(results: Sequence[Result], kept: str = "kept per layer") -> str:
    header, *rows = _cells(results, kept)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    number = 'style="text-align:right; white-space:nowrap"'
    body = "".join(
        "<tr>"
        + f"<td>{html.escape(row[0])}</td>"
        + "".join(f"<td {number}>{html.escape(c)}</td>" for c in row[1:])
        + "</tr>"
        for row in rows
    )
    return (
        '<table class="remat-explorer" style="font-size:0.85em">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


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


def plot_tradeoff(runs: Sequence[tuple[str, Sequence[Result]]]):
    """Compiled temporary memory against step time: one panel per run, one marker per policy.

    Markers are hollow and differ in shape, so policies that land on the same point (they keep
    the same values) stay visible on top of each other.
    """
    import matplotlib.pyplot as plt

    order = list(POLICIES) + [r.policy for _, rs in runs for r in rs if r.policy not in POLICIES]
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(7.5, 3.6 * len(runs) + 1.3), layout="constrained", squeeze=False
    )
    shown: dict[str, Any] = {}
    for ax, (title, results) in zip(axes[:, 0], runs, strict=True):
        timed = [r for r in results if r.step_time_s is not None]
        scale, unit = _bytes_axis([r.temp_bytes for r in timed])
        for r in timed:
            style = _style(r.policy, order)
            shown[r.policy] = ax.scatter(
                r.step_time_s * 1e3,
                r.temp_bytes / scale,
                s=90,
                facecolors="none",
                edgecolors=style["color"],
                marker=style["marker"],
                linewidths=1.8,
            )
        ax.set_xlabel("step time of jit(grad(loss)) (ms)")
        ax.set_ylabel(f"XLA temporary memory ({unit})")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    fig.legend(
        list(shown.values()),
        list(shown),
        loc="outside lower center",
        ncol=2,
        fontsize=8,
        frameon=False,
    )
    return fig


def plot_depth(runs: Sequence[tuple[str, Sequence[DepthPoint]]]):
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
            ax.plot(
                [n for n, _ in mine],
                [t / scale for _, t in mine],
                label=name,
                color=_style(name, order)["color"],
                marker=_style(name, order)["marker"],
            )
        ax.set_xticks(sorted({p.layers for p in points}))
        ax.set_xlabel("layers")
        ax.set_ylabel(f"XLA temporary memory ({unit})")
        ax.set_ylim(bottom=0)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, frameon=False)
        ax.grid(alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig


# --- the reader's own function -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The table ``compare_policies`` returns: an HTML table in a notebook, Markdown in ``str``.

    ``rows`` holds the same figures as plain dicts (bytes, FLOPs, seconds), one per policy, in
    the order measured; ``plot()`` draws memory against step time.
    """

    results: list[Result]
    #: Column heading for the residual bytes: the function is not a layer.
    KEPT = "kept for the backward pass"

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(r) for r in self.results]

    def __str__(self) -> str:
        return table_markdown(self.results, self.KEPT)

    def _repr_html_(self) -> str:
        return table_html(self.results, self.KEPT)

    def plot(self, title: str = "your function"):
        return plot_tradeoff([(title, self.results)])


def compare_policies(
    fn: Callable[..., Any],
    *args: Any,
    policies: dict[str, Any] | Sequence[str] | None = None,
    repeats: int = MIN_REPEATS,
) -> Comparison:
    """Measure ``jax.grad(jax.checkpoint(fn, policy=...))`` for several policies.

    ``fn`` must return a real scalar and take at least one floating-point array; gradients are
    taken with respect to all of its arguments. ``policies`` is a dict of name -> policy, a list
    of names from :data:`POLICIES`, or ``None`` for a default set. Each row gives the bytes JAX
    keeps for the backward pass, XLA's temporary memory and FLOPs, and the median step time.

    By default the whole of ``fn`` is wrapped in ``jax.checkpoint``. If ``fn`` takes a keyword
    argument ``policy``, it is called with each policy instead (``None`` meaning: no
    ``jax.checkpoint``), so that it can apply the policy where it belongs, e.g. to a scan body.

    Returns a :class:`Comparison`: an HTML table in a notebook, ``.rows`` as plain numbers and
    ``.plot()`` for memory against time. Raises ``TypeError`` if no argument is a floating-point
    array or the output is not floating point, ``ValueError`` if the output is not a scalar or
    ``jax.grad`` cannot differentiate ``fn``, before anything is measured.
    """
    name = getattr(fn, "__name__", repr(fn))
    leaves = jax.tree_util.tree_leaves(args)
    if not any(
        isinstance(leaf, (jax.Array, np.ndarray)) and jnp.issubdtype(leaf.dtype, jnp.floating)
        for leaf in leaves
    ):
        raise TypeError(
            f"compare_policies needs at least one floating-point array among the arguments of "
            f"{name!r} to differentiate with respect to; it was given "
            f"{[type(a).__name__ for a in args] or 'no arguments'}"
        )
    try:
        takes_policy = "policy" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins and some callables have no signature
        takes_policy = False
    plain = functools.partial(fn, policy=None) if takes_policy else fn
    try:
        out = jax.eval_shape(plain, *args)
    except Exception as err:
        raise ValueError(f"calling {name!r} with these arguments failed: {err}") from err
    if not isinstance(out, jax.ShapeDtypeStruct) or out.shape != ():
        raise ValueError(
            f"compare_policies needs a function that returns a scalar (a loss); {name!r} "
            f"returns {out}"
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(
            f"{name!r} returns {out.dtype}, which cannot be differentiated: return a "
            "floating-point scalar"
        )
    argnums = tuple(range(len(args)))
    try:
        jax.eval_shape(jax.grad(plain, argnums=argnums, allow_int=True), *args)
    except Exception as err:
        raise ValueError(f"jax.grad cannot differentiate {name!r}: {err}") from err

    if policies is None:
        policies = [
            NO_REMAT,
            "dots_saveable",
            "dots_with_no_batch_dims_saveable",
            "nothing_saveable",
        ]
    if not isinstance(policies, dict):
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise KeyError(f"unknown policies {unknown}; known: {list(POLICIES)}")
        policies = {p: POLICIES[p] for p in policies}
    results = []
    for label, policy in policies.items():
        if takes_policy:
            f = functools.partial(fn, policy=policy)
        else:
            f = fn if policy is None else jax.checkpoint(fn, policy=policy)
        grad = jax.grad(f, argnums=argnums, allow_int=True)
        stats = compiled_stats(grad, *args)
        results.append(
            Result(
                policy=label,
                residual_bytes_per_layer=saved_residuals(f, *args).excluding_arguments().nbytes,
                temp_bytes=stats.temp_bytes,
                argument_bytes=stats.argument_bytes,
                host_temp_bytes=stats.host_temp_bytes,
                flops=stats.flops,
                step_time_s=time_call(jax.jit(grad), *args, repeats=repeats).median_s,
            )
        )
    return Comparison(results)


# --- command line ------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.explorer",
        description="Measure every checkpoint policy on a stack of transformer blocks.",
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--seq", type=int)
    parser.add_argument("--width", type=int)
    parser.add_argument("--heads", type=int)
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per policy")
    parser.add_argument(
        "--policies",
        type=lambda text: [name.strip() for name in text.split(",") if name.strip()],
        help="comma-separated names to measure (default: all); see examples.explorer.POLICIES",
    )
    parser.add_argument(
        "--depths",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[2, 4, 8, 16],
        help="layer counts of the memory-against-depth sweep (default: 2,4,8,16)",
    )
    parser.add_argument("--out", type=Path, help="write the results to this JSON file")
    ns = parser.parse_args(argv)
    overrides = {k: getattr(ns, k) for k in ("layers", "batch", "seq", "width", "heads")}
    try:
        cfg = dataclasses.replace(SIZES[ns.size], **{k: v for k, v in overrides.items() if v})
    except ValueError as err:
        parser.error(str(err))
    unknown = [n for n in ns.policies or () if n not in POLICIES]
    if unknown:
        parser.error(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    if ns.out is not None and ns.out.exists():
        print(f"{ns.out} exists; not overwriting it (remove it first)", file=sys.stderr)
        return 2
    result = run(cfg, repeats=ns.repeats, layers=ns.depths, policies=ns.policies)
    print(f"# {result.label()}  {cfg}")
    print(table_markdown(result.results))
    if ns.out is not None:
        save(result, ns.out)
        print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
