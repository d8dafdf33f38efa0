"""The functions the tutorial runs: the worked examples of JAX's remat tutorial, same shapes.

Sections, in the page's order:

1. a chain of three ``sin(W @ x)`` stages, plain, checkpointed per stage, under a policy, and with
   named values;
2. two VJPs of ``sin``, and where a checkpoint helps in a composition;
3. the ``loss`` / ``predict`` / ``layer`` model for policies;
4. recursive checkpointing of a chain of ``D`` sines, with a residual-count and cost sweep;
5. a scan-over-layers MLP, compiled with and without a checkpointed body.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.fwd_bwd import fwd_bwd
from examples.measure import compiled_stats
from examples.residuals import saved_residuals


def remat_alias_check() -> dict[str, bool]:
    """Is ``jax.remat`` the object ``jax.checkpoint``, and does it trace to the same program?

    Releases differ on the first (some define ``remat`` as a thin wrapper that forwards to
    ``checkpoint``); the second is what matters.
    """
    fn = lambda x: jnp.sin(jnp.sin(x))
    remat_jaxpr = jax.make_jaxpr(jax.remat(fn))(1.0)
    checkpoint_jaxpr = jax.make_jaxpr(jax.checkpoint(fn))(1.0)
    return {
        "jax.remat is jax.checkpoint": jax.remat is jax.checkpoint,
        "same jaxpr": str(remat_jaxpr) == str(checkpoint_jaxpr),
    }


# -- 1. A chain of three stages -------------------------------------------------------------------


def g(W: jax.Array, x: jax.Array) -> jax.Array:
    """One stage: a matrix-vector product, then an elementwise sine."""
    return jnp.sin(W @ x)


def f(W1: jax.Array, W2: jax.Array, W3: jax.Array, x: jax.Array) -> jax.Array:
    """Three stages, ``f = g(W3, .) o g(W2, .) o g(W1, .)``, nothing checkpointed."""
    return g(W3, g(W2, g(W1, x)))


def f_checkpoint_each(W1: jax.Array, W2: jax.Array, W3: jax.Array, x: jax.Array) -> jax.Array:
    """The same three stages, each wrapped in ``jax.checkpoint`` where it is called."""
    stage = jax.checkpoint(g)
    return stage(W3, stage(W2, stage(W1, x)))


#: All of ``f`` under one checkpoint whose policy lets matrix products (without batch dims) stay.
f_dots_saveable = jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)


def f_named(W1: jax.Array, W2: jax.Array, W3: jax.Array, x: jax.Array) -> jax.Array:
    """``f`` with each stage's output tagged ``a``, ``b``, ``c`` by ``checkpoint_name``."""
    h = checkpoint_name(g(W1, x), name="a")
    h = checkpoint_name(g(W2, h), name="b")
    return checkpoint_name(g(W3, h), name="c")


#: Only the value named ``a`` may be kept; everything else is recomputed.
f_keep_a = jax.checkpoint(f_named, policy=jax.checkpoint_policies.save_only_these_names("a"))


def chain_inputs() -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``W1`` (5x4), ``W2`` (6x5), ``W3`` (7x6) and ``x`` (4,), all ones, as in JAX's tutorial."""
    return jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4)


# -- 2. Fundamentals ------------------------------------------------------------------------------


def sin_vjp_save_cos(x: jax.Array) -> tuple[jax.Array, Callable[[jax.Array], jax.Array]]:
    """VJP of ``sin`` that evaluates ``cos(x)`` now and keeps it for the backward pass."""
    y = jnp.sin(x)
    cos_x = jnp.cos(x)  # a residual: computed on the forward pass, held until the backward pass

    def backward(y_bar: jax.Array) -> jax.Array:
        return y_bar * cos_x

    return y, backward


def sin_vjp_recompute_cos(x: jax.Array) -> tuple[jax.Array, Callable[[jax.Array], jax.Array]]:
    """VJP of ``sin`` that keeps ``x`` and evaluates ``cos(x)`` only when the cotangent arrives."""
    y = jnp.sin(x)

    def backward(y_bar: jax.Array) -> jax.Array:
        return y_bar * jnp.cos(x)  # recomputed from the input, on the backward pass

    return y, backward


def stage_g(x: jax.Array) -> jax.Array:
    """The first stage of the composition ``h o g``: two sines, so two cosines to keep."""
    return jnp.sin(jnp.sin(x))


def stage_h(y: jax.Array) -> jax.Array:
    """The second stage: two more sines."""
    return jnp.sin(jnp.sin(y))


def composition_variants() -> dict[str, Callable[[jax.Array], jax.Array]]:
    """``h o g`` four ways: where the checkpoint goes decides what the forward pass keeps."""
    return {
        "no checkpoint": lambda x: stage_h(stage_g(x)),
        "checkpoint g (first stage)": lambda x: stage_h(jax.checkpoint(stage_g)(x)),
        "checkpoint h (last stage)": lambda x: jax.checkpoint(stage_h)(stage_g(x)),
        "checkpoint h o g (everything)": jax.checkpoint(lambda x: stage_h(stage_g(x))),
    }


def three_stage_variants() -> dict[str, Callable[[jax.Array], jax.Array]]:
    """``f3 o f2 o f1`` (each stage two sines) with the checkpoint in each place worth trying."""
    f1 = f2 = f3 = stage_g
    ck = jax.checkpoint
    return {
        "none": lambda x: f3(f2(f1(x))),
        "f1": lambda x: f3(f2(ck(f1)(x))),
        "f2": lambda x: f3(ck(f2)(f1(x))),
        "f2 o f1": lambda x: f3(ck(lambda u: f2(f1(u)))(x)),
        "f1 and f2": lambda x: f3(ck(f2)(ck(f1)(x))),
        "f3 (last)": lambda x: ck(f3)(f2(f1(x))),
        "f3 o f2 o f1 (all)": ck(lambda x: f3(f2(f1(x)))),
    }


@dataclasses.dataclass(frozen=True)
class PlacementRow:
    placement: str
    kept: int  #: values the forward pass computes and keeps (arguments not counted)
    recomputed_sines: int  #: sines evaluated again on the backward pass

    @staticmethod
    def header() -> str:
        return f"{'checkpoint on':<22}{'kept after forward':>20}{'sines recomputed':>18}"

    def __str__(self) -> str:
        return f"{self.placement:<22}{self.kept:>20}{self.recomputed_sines:>18}"


def placement_table(x: jax.Array) -> list[PlacementRow]:
    """For each placement in :func:`three_stage_variants`: residuals kept, sines recomputed."""
    rows = []
    for name, fn in three_stage_variants().items():
        kept = len(saved_residuals(fn, x).excluding_arguments())
        rows.append(PlacementRow(name, kept, fwd_bwd(fn, x).count("sin", "backward")))
    return rows


def only_what_is_needed(x: jax.Array) -> jax.Array:
    """Several intermediates, of which the backward pass needs two: ``cos(a)`` and ``c``."""
    a = x + 1.0  # the derivative of a shift is 1: nothing to keep
    b = jnp.sin(a)  # needs cos(a)
    c = 2.0 * b  # a scaling: nothing to keep
    return jnp.sum(c * c)  # needs c (d(c*c)/dc = 2c)


# -- 3. Policies on a small model -----------------------------------------------------------------


def layer(W: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.sin(W @ x)


def predict(params: Sequence[jax.Array], x: jax.Array) -> jax.Array:
    """Every matrix but the last feeds a ``layer``; the last is a plain linear read-out."""
    *hidden, readout = params
    for W in hidden:
        x = layer(W, x)
    return readout @ x


def loss(params: Sequence[jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sum((predict(params, x) - y) ** 2)


def predict_named(params: Sequence[jax.Array], x: jax.Array) -> jax.Array:
    """:func:`predict` with each layer's output named ``layer{i}_output``."""
    *hidden, readout = params
    for i, W in enumerate(hidden):
        x = checkpoint_name(layer(W, x), name=f"layer{i}_output")
    return readout @ x


def loss_named(params: Sequence[jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.sum((predict_named(params, x) - y) ** 2)


def model_inputs() -> tuple[list[jax.Array], jax.Array, jax.Array]:
    """``params = [W1, W2, W3]`` (4x4 ones), ``x`` and ``y`` (ones of length 4)."""
    W = jnp.ones((4, 4))
    return [W, W, W], jnp.ones(4), jnp.ones(4)


#: The policies the tutorial names, with what each allows to be saved. The last is the name an
#: older version of JAX's tutorial gives; it is listed to show that it does not exist.
POLICY_NOTES: dict[str, str] = {
    "everything_saveable": "anything may be saved (what autodiff does without a checkpoint)",
    "nothing_saveable": "nothing may be saved: recompute everything from the inputs",
    "dots_saveable": "outputs of matrix products (dot_general) may be saved",
    "checkpoint_dots": "an alias of dots_saveable",
    "dots_with_no_batch_dims_saveable": "matrix products without batch dimensions may be saved",
    "checkpoint_dots_with_no_batch_dims": "an alias of dots_with_no_batch_dims_saveable",
    "save_only_these_names": "only values named (checkpoint_name) with one of the given names",
    "save_any_names_but_these": "any named value except those with the given names",
    "save_anything_except_these_names": "anything except values with the given names",
    "save_anything_but_these_names": "(named in an older tutorial; not a real policy)",
}


def policy_table() -> list[tuple[str, bool, str]]:
    """``(name, hasattr(jax.checkpoint_policies, name), note)`` for each of :data:`POLICY_NOTES`."""
    return [
        (name, hasattr(jax.checkpoint_policies, name), note) for name, note in POLICY_NOTES.items()
    ]


def policy_markdown() -> str:
    """:func:`policy_table` as a Markdown table, for the page."""
    lines = ["| name | in `jax.checkpoint_policies`? | what it lets the forward pass keep |"]
    lines.append("| --- | :---: | --- |")
    for name, exists, note in policy_table():
        lines.append(f"| `{name}` | {'yes' if exists else '**no**'} | {note} |")
    return "\n".join(lines)


# -- 4. Recursive checkpointing -------------------------------------------------------------------


def chain_compose(funs: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """Apply ``funs`` in order: ``chain_compose([f1, f2])(x) == f2(f1(x))``."""

    def chained(x: Any) -> Any:
        for step in funs:
            x = step(x)
        return x

    return chained


def recursive_checkpoint(funs: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """Compose ``funs`` (applied last-to-first) checkpointing one half at every level of a
    binary split, so the residuals kept grow like ``log2(len(funs))``."""
    if len(funs) == 1:
        return funs[0]
    if len(funs) == 2:
        outer, inner = funs
        return lambda x: outer(inner(x))
    half = len(funs) // 2
    outer = recursive_checkpoint(funs[:half])
    inner = jax.checkpoint(recursive_checkpoint(funs[half:]))
    return lambda x: outer(inner(x))


def plain_residual_formula(depth: int) -> int:
    """A chain of ``depth`` sines keeps one cosine per sine."""
    return depth


def recursive_residual_formula(depth: int) -> int:
    """Residuals kept by :func:`recursive_checkpoint` for ``depth`` sines.

    ``R(1) = 1`` (a cosine), ``R(2) = 2`` (two cosines), and for ``D >= 3`` the outer half's
    residuals plus the checkpointed inner half's input: ``R(D) = 1 + R(D // 2)``. That unrolls
    to ``floor(log2 D) + 1``.
    """
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    return depth.bit_length()


def recursive_sin_cos_formula(depth: int) -> int:
    """sin and cos evaluations of one gradient through :func:`recursive_checkpoint`, ``depth`` a
    power of two.

    The forward pass runs the checkpointed inner half without differentiating it (``D/2`` sines)
    and differentiates the outer half (``T(D/2)``); the backward pass differentiates the inner
    half again, where its final sine is dropped because only cosines are needed
    (``T(D/2) - 1``). So ``T(D) = D/2 + 2 T(D/2) - 1`` with ``T(2) = 4``, which solves to
    ``T(D) = D (log2 D + 2) / 2 + 1``, about ``(log2 D + 2) / 4`` times the plain ``2 D``.
    """
    if depth < 2 or depth & (depth - 1):
        raise ValueError(f"depth must be a power of two >= 2, not {depth}")
    log2 = depth.bit_length() - 1
    return depth * (log2 + 2) // 2 + 1


@dataclasses.dataclass(frozen=True)
class DepthRow:
    depth: int
    plain_residuals: int
    recursive_residuals: int
    plain_sin_cos: int  #: sin and cos evaluations, forward and backward, plain chain
    recursive_sin_cos: int  #: the same for the recursive scheme


def sin_cos_evaluations(fn: Callable[[Any], Any], x: Any) -> int:
    """``sin`` and ``cos`` equations in the forward and backward jaxprs of ``fn`` at ``x``.

    Each equation runs once (there are no loops in these jaxprs), so this counts evaluations;
    for scalar inputs it is the transcendental FLOP count of one gradient.
    """
    view = fwd_bwd(fn, x)
    return view.count("sin") + view.count("cos")


def depth_sweep(depths: Sequence[int] = (2, 4, 8, 16, 32, 64, 128)) -> list[DepthRow]:
    """Residuals kept and sin/cos evaluated for a chain of ``D`` sines, plain and recursive."""
    rows = []
    x = jnp.float32(3.0)
    for d in depths:
        plain, recursive = chain_compose([jnp.sin] * d), recursive_checkpoint([jnp.sin] * d)
        rows.append(
            DepthRow(
                depth=d,
                plain_residuals=len(saved_residuals(plain, x)),
                recursive_residuals=len(saved_residuals(recursive, x)),
                plain_sin_cos=sin_cos_evaluations(plain, x),
                recursive_sin_cos=sin_cos_evaluations(recursive, x),
            )
        )
    return rows


def plot_depth_sweep(rows: Sequence[DepthRow]):
    """Residuals kept (left) and sin/cos evaluations (right) against depth, log2 depth axis."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    depths = [r.depth for r in rows]
    fig, (mem, cost) = plt.subplots(1, 2, figsize=(8, 3), layout="constrained", dpi=90)
    styles = {"plain chain": ("#4C72B0", "o"), "recursive checkpoint": ("#C44E52", "s")}
    series = {
        "plain chain": ([r.plain_residuals for r in rows], [r.plain_sin_cos for r in rows]),
        "recursive checkpoint": (
            [r.recursive_residuals for r in rows],
            [r.recursive_sin_cos for r in rows],
        ),
    }
    for label, (kept, evaluations) in series.items():
        color, marker = styles[label]
        mem.plot(depths, kept, marker=marker, color=color, label=label)
        cost.plot(depths, evaluations, marker=marker, color=color, label=label)
    mem.set_ylabel("residuals kept after forward")
    mem.set_yscale("log", base=2)
    cost.set_ylabel("sin + cos evaluations (fwd + bwd)")
    cost.set_yscale("log", base=2)
    for ax in (mem, cost):
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.set_xscale("log", base=2)
        ax.set_xticks(depths, [str(d) for d in depths])
        ax.set_xlabel("chain depth D (number of sines)")
        ax.grid(True, which="major", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    mem.legend(frameon=False)
    return fig


# -- 5. Scan over layers under jit ----------------------------------------------------------------


def mlp_layer(x: jax.Array, W_b: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
    """One ReLU layer as a ``scan`` body: carry ``x``, consume this layer's ``(W, b)``."""
    W, b = W_b
    return jnp.maximum(x @ W + b, 0.0), None


SCAN_BODIES: dict[str, Callable[..., Any]] = {
    "plain body": mlp_layer,
    "checkpointed body": jax.checkpoint(mlp_layer),
    "checkpointed body, dots saveable": jax.checkpoint(
        mlp_layer, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    ),
}


def scan_mlp(body: Callable[..., Any], weights: jax.Array, biases: jax.Array, x: jax.Array):
    """Apply ``body`` once per stacked layer with ``jax.lax.scan``."""
    out, _ = jax.lax.scan(body, x, (weights, biases))
    return out


def scan_mlp_loss(body: Callable[..., Any]) -> Callable[..., jax.Array]:
    def loss(weights: jax.Array, biases: jax.Array, x: jax.Array) -> jax.Array:
        return jnp.mean(scan_mlp(body, weights, biases, x) ** 2)

    return loss


def scan_inputs(depth: int = 32, batch: int = 256, width: int = 512, seed: int = 0):
    """Stacked weights ``(depth, width, width)``, biases ``(depth, width)``, a ``(batch, width)``
    input."""
    kw, kx = jax.random.split(jax.random.key(seed))
    weights = jax.random.normal(kw, (depth, width, width)) * (2.0 / width) ** 0.5
    biases = jnp.full((depth, width), 0.01)
    return weights, biases, jax.random.normal(kx, (batch, width))


@dataclasses.dataclass(frozen=True)
class ScanRow:
    body: str
    temp_bytes: int
    flops: float | None


def scan_stats(depth: int = 32, batch: int = 256, width: int = 512) -> list[ScanRow]:
    """XLA's temporary memory and FLOPs for ``jax.grad`` of the scan MLP, per body."""
    args = scan_inputs(depth, batch, width)
    rows = []
    for name, body in SCAN_BODIES.items():
        stats = compiled_stats(jax.grad(scan_mlp_loss(body), argnums=(0, 1)), *args)
        rows.append(ScanRow(name, stats.temp_bytes, stats.flops))
    return rows


def scan_table(rows: Sequence[ScanRow]) -> str:
    """A small Markdown table, FLOPs relative to the plain body."""
    base = rows[0].flops
    lines = [
        "| scan body | XLA temp memory | FLOPs | FLOPs vs plain |",
        "| --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        flops = "n/a" if r.flops is None else f"{r.flops / 1e6:,.0f} M"
        ratio = "n/a" if not (r.flops and base) else f"{r.flops / base:.2f}×"
        lines.append(f"| {r.body} | {r.temp_bytes / 2**20:.1f} MiB | {flops} | {ratio} |")
    return "\n".join(lines)
