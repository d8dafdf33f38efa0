"""The tutorial's traced examples (compiled ones: :mod:`examples.tutorial.compiled` and
:mod:`examples.tutorial.when_not`): 1. ``jax.remat`` beside ``jax.checkpoint`` (tests only);
2. a chain of three ``sin(W @ x)`` stages, plain, per stage, under a policy,
with names; 3. why it works (two VJPs of ``sin``, ``jax.checkpoint`` by hand, ``jvp`` against
``linearize``, the peak of each placement); 4. the ``loss`` / ``predict`` / ``layer`` model for
policies. Recursive checkpointing of a chain of sines: :mod:`examples.tutorial.recursive`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.tools.display import Table
from examples.tools.jaxprs import primitive_counts
from examples.tools.residuals import saved_residuals
from examples.tutorial.fwd_bwd import fwd_bwd
from examples.tutorial.liveness import peak_bytes

# The pages print where each residual was made (file and line, ``traced.py:52:11``): keep the
# functions below on the lines they hold, or the pages' printed residuals change.

# -- 1. jax.remat and jax.checkpoint --------------------------------------------------------------


def remat_vs_checkpoint() -> dict[str, Any]:
    """What separates ``jax.remat`` from ``jax.checkpoint`` in the installed JAX (the page links
    the migration notes for the details)."""
    ours, theirs = inspect.signature(jax.remat), inspect.signature(jax.checkpoint)
    fn = lambda x, y: jnp.sin(jnp.sin(x)) * y
    return {
        "same_object": jax.remat is jax.checkpoint,
        "remat_lacks": sorted(set(theirs.parameters) - set(ours.parameters)),
        "checkpoint_prevent_cse": str(theirs.parameters["prevent_cse"].annotation),
        "remat_prevent_cse": str(ours.parameters["prevent_cse"].annotation),
        "same_jaxpr": str(jax.make_jaxpr(jax.remat(fn))(1.0, 2.0))
        == str(jax.make_jaxpr(jax.checkpoint(fn))(1.0, 2.0)),
    }


# -- 2. A chain of three stages -------------------------------------------------------------------


def g(W: jax.Array, x: jax.Array) -> jax.Array:
    """One stage: a matrix-vector product, then an elementwise sine."""
    return jnp.sin(W @ x)


def f(W1: jax.Array, W2: jax.Array, W3: jax.Array, x: jax.Array) -> jax.Array:
    """Three stages, ``f = g(W3, .) o g(W2, .) o g(W1, .)``, nothing checkpointed."""
    return g(W3, g(W2, g(W1, x)))


def f_checkpoint_each(W1: jax.Array, W2: jax.Array, W3: jax.Array, x: jax.Array) -> jax.Array:
    """The same three stages, each wrapped in ``jax.checkpoint`` where it is called."""
    stage: Callable[..., jax.Array] = jax.checkpoint(g)
    return stage(W3, stage(W2, stage(W1, x)))


#: All of ``f`` under one checkpoint whose policy lets matrix products (without batch dims) stay.
f_dots_saveable = jax.checkpoint(f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)


def f_named(W1: jax.Array, W2: jax.Array, W3: jax.Array, x: jax.Array) -> jax.Array:
    """``f`` with each stage's output tagged ``a``, ``b``, ``c`` by ``checkpoint_name``."""
    h = checkpoint_name(g(W1, x), name="a")
    h = checkpoint_name(g(W2, h), name="b")
    c: jax.Array = checkpoint_name(g(W3, h), name="c")
    return c


#: Only the value named ``a`` may be kept; everything else is recomputed.
f_keep_a = jax.checkpoint(f_named, policy=jax.checkpoint_policies.save_only_these_names("a"))


def chain_inputs() -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """``W1`` (5x4), ``W2`` (6x5), ``W3`` (7x6) and ``x`` (4,), all ones, as in JAX's tutorial."""
    return jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4)


# -- 3. Why it works ------------------------------------------------------------------------------


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


def checkpoint_by_hand(g: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.checkpoint(g)`` written out: keep ``g``'s inputs, and re-run ``jax.vjp(g, ...)``
    when the cotangent arrives."""

    @jax.custom_vjp
    def checkpointed(*args: Any) -> Any:
        return g(*args)

    def forward(*args: Any) -> tuple[Any, tuple[Any, ...]]:
        return g(*args), args  # the residuals are the inputs, nothing else

    def backward(args: tuple[Any, ...], out_bar: Any) -> Any:
        _, g_vjp = jax.vjp(g, *args)  # g's forward pass again, this time keeping its residuals
        return g_vjp(out_bar)

    checkpointed.defvjp(forward, backward)
    return checkpointed


def stage_g(x: jax.Array) -> jax.Array:
    """The first stage of the composition ``h o g``: two sines, so two cosines to keep."""
    return jnp.sin(jnp.sin(x))


def stage_h(y: jax.Array) -> jax.Array:
    """The second stage: two more sines."""
    return jnp.sin(jnp.sin(y))


def jvp_and_linearize(fn: Callable[[jax.Array], jax.Array], x: jax.Array) -> dict[str, int]:
    """Where ``fn``'s sines and cosines run under ``jax.jvp`` and under ``jax.linearize``.

    ``jvp_sin_cos``: sin and cos equations in the jaxpr of ``jax.jvp(fn, (x,), (t,))``;
    ``linear_sin_cos``: those in the linear function ``jax.linearize`` returns (recomputation);
    ``linear_consts``: the arrays that linear function closes over (its residuals).
    """
    jvp = jax.make_jaxpr(lambda x, t: jax.jvp(fn, (x,), (t,)))(x, x)
    _, linear = jax.linearize(fn, x)
    linear_jaxpr = jax.make_jaxpr(linear)(x)
    jvp_counts, linear_counts = primitive_counts(jvp), primitive_counts(linear_jaxpr)
    return {
        "jvp_sin_cos": jvp_counts["sin"] + jvp_counts["cos"],
        "linear_sin_cos": linear_counts["sin"] + linear_counts["cos"],
        "linear_consts": len(linear_jaxpr.consts),
    }


def jvp_linearize_table(fn: Callable[[jax.Array], jax.Array], x: jax.Array) -> Table:
    """:func:`jvp_and_linearize` for ``fn`` and for ``jax.checkpoint(fn)``."""
    rows = []
    for name, variant in (("f", fn), ("jax.checkpoint(f)", jax.checkpoint(fn))):
        counts = jvp_and_linearize(variant, x)
        rows.append((f"`{name}`", *counts.values()))
    header = ["function", "sin + cos in jax.jvp", "sin + cos in the linear function"]
    header += ["arrays it closes over"]
    return Table(header, rows)


def composition_variants() -> dict[str, Callable[[jax.Array], jax.Array]]:
    """``h o g`` four ways: where the checkpoint goes decides what the forward pass keeps."""
    return {
        "no checkpoint": lambda x: stage_h(stage_g(x)),
        "checkpoint g (first stage)": lambda x: stage_h(jax.checkpoint(stage_g)(x)),
        "checkpoint h (last stage)": lambda x: jax.checkpoint(stage_h)(stage_g(x)),
        "checkpoint h o g (everything)": jax.checkpoint(lambda x: stage_h(stage_g(x))),
    }


def peak_values(fn: Callable[[jax.Array], jax.Array], x: jax.Array) -> int:
    """:func:`.liveness.peak_bytes` of the gradient of ``fn`` over ``x.nbytes``."""
    return peak_bytes(fn, x) // x.nbytes


def composition_peaks(x: jax.Array) -> dict[str, int]:
    """:func:`peak_values` for each of :func:`composition_variants`."""
    return {name: peak_values(fn, x) for name, fn in composition_variants().items()}


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
    peak: int  #: most values alive at once during the whole gradient (tutorial.liveness)


def placement_rows(x: jax.Array) -> list[PlacementRow]:
    """For each placement in :func:`three_stage_variants`: kept, recomputed, peak."""
    rows = []
    for name, fn in three_stage_variants().items():
        kept = len(saved_residuals(fn, x).excluding_arguments())
        recomputed = fwd_bwd(fn, x).count("sin", "backward")
        rows.append(PlacementRow(name, kept, recomputed, peak_values(fn, x)))
    return rows


def placement_best(rows: Sequence[PlacementRow]) -> str:
    """The placement(s) with the lowest peak, as the page names them (``f1 and f2``)."""
    low = min(r.peak for r in rows)
    return " or ".join(f"`{r.placement}`" for r in rows if r.peak == low)


def placement_table(rows: Sequence[PlacementRow]) -> Table:
    return Table(
        ["checkpoint on", "kept after forward", "sines recomputed", "peak (values held)"],
        [(f"`{r.placement}`", r.kept, r.recomputed_sines, r.peak) for r in rows],
    )


def only_what_is_needed(x: jax.Array) -> jax.Array:
    """Several intermediates, of which the backward pass needs two: ``cos(a)`` and ``c``."""
    a = x + 1.0  # the derivative of a shift is 1: nothing to keep
    b = jnp.sin(a)  # needs cos(a)
    c = 2.0 * b  # a scaling: nothing to keep
    return jnp.sum(c * c)  # needs c (d(c*c)/dc = 2c)


# -- 4. Policies on a small model -----------------------------------------------------------------


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
    "dots_saveable": "outputs of matrix products and convolutions may be saved",
    "checkpoint_dots": "an alias of dots_saveable",
    "dots_with_no_batch_dims_saveable": "matrix products without batch dimensions may be saved",
    "checkpoint_dots_with_no_batch_dims": "an alias of dots_with_no_batch_dims_saveable",
    "save_only_these_names": "only values named (checkpoint_name) with one of the given names",
    "save_any_names_but_these": "any named value except those with the given names",
    "save_anything_except_these_names": "documented: anything but the given names (see below)",
    "save_anything_but_these_names": "(named in an older tutorial; not a real policy)",
}


def policy_rows() -> list[tuple[str, bool, str]]:
    """``(name, hasattr(jax.checkpoint_policies, name), note)`` for each of :data:`POLICY_NOTES`."""
    return [
        (name, hasattr(jax.checkpoint_policies, name), note) for name, note in POLICY_NOTES.items()
    ]


def except_names_keeps_the_name(name: str = "a") -> bool:
    """Whether ``save_anything_except_these_names(name)`` still keeps ``name`` in :func:`f_named`
    (its docstring says it should not)."""
    policy = jax.checkpoint_policies.save_anything_except_these_names(name)
    kept = saved_residuals(jax.checkpoint(f_named, policy=policy), *chain_inputs())
    return name in {r.name for r in kept}


def except_names_verdict(name: str = "a") -> str:
    """What ``save_anything_except_these_names(name)`` does to :func:`f_named`, judged by the
    bytes it keeps against ``everything_saveable`` (a label can leave the listing while the same
    array stays under another one), then by whether the name is still listed."""
    cp = jax.checkpoint_policies
    args = chain_inputs()
    policy = cp.save_anything_except_these_names(name)
    kept = saved_residuals(jax.checkpoint(f_named, policy=policy), *args)
    everything = saved_residuals(jax.checkpoint(f_named, policy=cp.everything_saveable), *args)
    if kept.nbytes < everything.nbytes:
        return f"keeps fewer bytes than everything_saveable: it drops {name}, as the docstring says"
    if name in {r.name for r in kept}:
        return (
            f"still lists {name} and keeps every byte everything_saveable keeps: "
            "the policy ignores the names it is given"
        )
    return (
        f"no longer lists {name}, yet keeps every byte everything_saveable keeps: the same array "
        "stays, listed as the output of the primitive that made it"
    )


def policy_table() -> Table:
    return Table(
        ["name", "in `jax.checkpoint_policies`?", "what it lets the forward pass keep"],
        [(f"`{n}`", "yes" if ok else "**no**", note) for n, ok, note in policy_rows()],
        align=["left", "center", "left"],
    )
