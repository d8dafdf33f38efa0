"""One call that shows what JAX's next remat implementation (``jax_remat3``) changes in a function.

:func:`compare_remat3` differentiates a function twice, with the flag ``jax_remat3`` off and on,
and reports side by side what the forward pass keeps for the backward pass (count, bytes, which
values), which implementation the checkpoints traced to, how many optimization barriers the
lowered gradient holds, XLA's temporary memory and FLOPs for the compiled gradient, whether the
gradients agree, and each difference with its likely cause.
The flag is set only inside :func:`remat3_flag`, which puts it back as it found it whatever
happens. ``scan_transformer_case``, ``linen_case`` and ``nnx_case`` build the how-to guides'
models for the check. Everything here reads the installed JAX; no path of this repository is
needed, so it runs from the site's wheel and from a downloaded notebook.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.tools import compat
from examples.tools.display import format_bytes
from examples.tools.jaxprs import remat3, remat3_available, traced_remat_sites
from examples.tools.measure import compile_for_analysis
from examples.tools.residuals import Residual, Residuals, saved_residuals

FLAG = "jax_remat3"
_UNSET: Any = object()


def flag_available() -> bool:
    """Whether the installed JAX has the ``jax_remat3`` config option (added in jax 0.10)."""
    return remat3_available()


def remat3_flag(enabled: bool) -> contextlib.AbstractContextManager[None]:
    """Set ``jax_remat3`` to ``enabled`` inside the block; put back the value found on entry.

    The value is restored on every exit, an exception (``KeyboardInterrupt`` included) too. The
    package's one context manager for the flag, :func:`examples.tools.jaxprs.remat3`, does it.
    """
    return remat3(enabled)


def policy_kind(policy: Any) -> str:
    """A short name for a policy: JAX's own constructor or class, or ``custom function``."""
    if policy is None:
        return "none (keep nothing)"
    cp = jax.checkpoint_policies
    for name in ("everything_saveable", "nothing_saveable", "dots_saveable"):
        if policy is getattr(cp, name, None):
            return name
    module = getattr(policy, "__module__", "") or ""
    if not callable(policy) or not module.startswith("jax"):
        return "custom function" if callable(policy) else type(policy).__name__
    if isinstance(policy, type) or not hasattr(policy, "__qualname__"):
        return type(policy).__name__  # a policy object (class instance), as some releases build
    return str(policy.__qualname__).split(".")[0]


def _remat3_rule_exists(primitive: str) -> bool | None:
    """Whether ``jax_remat3`` has a rule of its own for ``primitive`` (``None``: cannot tell).

    Reads JAX's internal table of rules, guarded: a release that moves it answers ``None``.
    """
    try:
        from jax._src.interpreters import remat
    except ImportError:
        return None
    rules = getattr(remat, "rules", None)
    if not isinstance(rules, dict):
        return None
    return any(getattr(p, "name", None) == primitive for p in rules)


# --- one side: the flag off, or on ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Side:
    """What differentiating the function gave with the flag at one value."""

    flag: bool
    residuals: Residuals
    implementations: tuple[str, ...]  #: the primitive each checkpoint traced to
    barriers: int  #: optimization barriers in the lowered gradient
    gradient: list[np.ndarray]
    error: str | None = None  #: ``"TypeName: message"`` where differentiating raised
    temp_bytes: int | None = None  #: XLA's temporary memory for the compiled gradient
    flops: float | None = None  #: XLA's FLOP count for it (``None`` where not reported)

    @property
    def computed(self) -> Residuals:
        return self.residuals.excluding_arguments()

    def kept(self) -> str:
        """``"dot_general f32[4] ×2, 'hidden' f32[4]"``: the values computed and kept."""
        if self.error:
            return "—"
        counts = collections.Counter(_key(r) for r in self.computed)
        if not counts:
            return "nothing"
        return ", ".join(_label(k) + (f" ×{n}" if n > 1 else "") for k, n in counts.items())


def _key(r: Residual) -> tuple[str, str, str]:
    detail = "" if r.kind == "argument" else (r.detail if r.detail is not None else r.kind)
    return (r.kind, detail, r.type_str)


def _label(key: tuple[str, str, str]) -> str:
    kind, detail, type_str = key
    return f"'{detail}' {type_str}" if kind == "named" else f"{detail or kind} {type_str}"


def _names(names: list[str], shown: int = 2) -> str:
    if len(names) <= shown:
        return ", ".join(names) or "none"
    return ", ".join(names[:shown]) + f", … ({len(names)} in all)"


def _differentiable(f: Callable[..., Any], args: Sequence[Any], argnums: tuple[int, ...]) -> Any:
    def g(*diff: Any) -> Any:
        full = list(args)
        for i, d in zip(argnums, diff, strict=True):
            full[i] = d
        return f(*full)

    return g, [args[i] for i in argnums]


def _gradient(g: Callable[..., Any], diff: list[Any]) -> Any:
    out, vjp = jax.vjp(g, *diff)
    return vjp(jax.tree.map(jnp.ones_like, out))


def _measure(
    f: Callable[..., Any], args: Sequence[Any], argnums: tuple[int, ...], flag: bool, wrap: Any
) -> Side:
    with remat3_flag(flag):
        fn = f if wrap is None else wrap(f)  # wrapped under the flag: every release reads it then
        g, diff = _differentiable(fn, args, argnums)
        try:
            residuals = saved_residuals(fn, *args)  # what print_saved_residuals lists
            sites = tuple(s.primitive for s in traced_remat_sites(fn, *args))
            lowered = jax.jit(lambda *d: _gradient(g, list(d))).lower(*diff)
            compiled = compile_for_analysis(lowered)  # the step as XLA plans it
            gradient = [np.asarray(x) for x in jax.tree.leaves(_gradient(g, diff))]
        except Exception as e:  # reported on its side; the flag is restored by remat3_flag
            return Side(flag, Residuals(), (), 0, [], f"{type(e).__name__}: {e}".split("\n")[0])
    memory, cost = compiled.memory_analysis(), compat.cost_analysis(compiled)
    return Side(
        flag,
        residuals,
        sites,
        str(lowered.as_text()).count("optimization_barrier"),
        gradient,
        temp_bytes=None if memory is None else int(memory.temp_size_in_bytes),
        flops=None if not cost or "flops" not in cost else float(cost["flops"]),
    )


def _compiled(s: Side) -> str:
    temp = "not reported" if s.temp_bytes is None else format_bytes(s.temp_bytes)
    return f"{temp}, {'no count' if s.flops is None else f'{s.flops:,.0f}'} FLOPs"


# --- the report -------------------------------------------------------------------------------


def tolerance(dtype: Any) -> float:
    """Relative tolerance for comparing gradients: ten times the dtype's decimal resolution."""
    finfo: Any = jnp.finfo  # untyped in JAX
    return 10 * float(finfo(dtype).resolution)


@dataclasses.dataclass(frozen=True)
class Report:
    """The two sides, whether their gradients agree, and each difference with its cause."""

    policy: str
    off: Side
    on: Side
    gradients_agree: bool | None
    max_difference: float
    differences: tuple[str, ...]

    def rows(self) -> list[tuple[str, str, str]]:
        def cells(s: Side) -> list[str]:
            if s.error:
                return [s.error] + ["—"] * 6
            return [
                ", ".join(sorted(set(s.implementations))) or "no checkpoint",
                f"{len(s.residuals)} ({len(s.computed)} computed)",
                f"{format_bytes(s.residuals.nbytes)} ({format_bytes(s.computed.nbytes)} computed)",
                s.kept(),
                _names([str(r.argument) for r in s.residuals.of_kind("argument")]),
                str(s.barriers),
                _compiled(s),
            ]

        labels = ["checkpoints trace to", "residuals", "bytes", "computed and kept"]
        labels += ["arguments listed as", "optimization barriers", "compiled gradient: temp, FLOPs"]
        return list(zip(labels, cells(self.off), cells(self.on), strict=True))

    def verdict(self) -> str:
        if self.gradients_agree is None:
            return "gradients: not compared (a side raised)"
        word = "agree" if self.gradients_agree else "DIFFER"
        return f"gradients {word} (largest difference {self.max_difference:.3g})"

    def __repr__(self) -> str:
        width = max(len(r[0]) for r in self.rows())
        lines = [f"jax_remat3 off vs on, policy: {self.policy}"]
        for label, off, on in self.rows():
            lines.append(f"  {label:<{width}}  off: {off}\n  {'':<{width}}   on: {on}")
        lines.append(self.verdict())
        lines += [f"- {d}" for d in self.differences] or ["- no difference"]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:

        def esc(s: str) -> str:
            return s.replace("|", "\\|")

        lines = [f"**`jax_remat3` off and on**, policy: `{self.policy}`", ""]
        lines += ["| | flag off | flag on |", "| --- | --- | --- |"]
        lines += [f"| {a} | {esc(b)} | {esc(c)} |" for a, b, c in self.rows()]
        lines += ["", f"**{self.verdict()}**", ""]
        lines += [f"- {d}" for d in self.differences] or ["- no difference"]
        return "\n".join(lines)


def _compare_gradients(off: Side, on: Side) -> tuple[bool | None, float]:
    if off.error or on.error:
        return None, 0.0
    agree, worst = True, 0.0
    for a, b in zip(off.gradient, on.gradient, strict=True):
        if not jnp.issubdtype(a.dtype, jnp.inexact):
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        tol = tolerance(a.dtype)
        scale = float(np.max(np.abs(a64), initial=0.0))
        worst = max(worst, float(np.max(np.abs(a64 - b64), initial=0.0)))
        agree &= bool(np.allclose(b64, a64, rtol=tol, atol=tol * max(scale, 1e-30)))
    return agree, worst


def _residual_causes(off: Side, on: Side, policy: str) -> list[str]:
    before = collections.Counter(_key(r) for r in off.computed)
    after = collections.Counter(_key(r) for r in on.computed)
    lines = []
    for key in sorted(set(before) | set(after)):
        n_off, n_on = before[key], after[key]
        if n_off == n_on:
            continue
        kind, detail, _ = key
        change = f"{_label(key)}: kept {n_off}× without the flag, {n_on}× with it"
        if n_on < n_off and kind == "output" and _remat3_rule_exists(detail) is False:
            cause = (
                f"`{detail}` has no jax_remat3 rule of its own, so it is recomputed under any "
                "policy but everything_saveable"
            )
        elif n_on < n_off:
            cause = f"the jax_remat3 rule for it does not honour this policy ({policy}) here"
        elif kind == "named":
            cause = "checkpoint_name's jax_remat3 rule asked the policy and it said save"
        else:
            cause = f"under jax_remat3 the rule for `{detail}` asked the policy, which said save"
        lines.append(f"{change}: {cause}.")
    return lines


def _differences(off: Side, on: Side, policy: str, agree: bool | None) -> tuple[str, ...]:
    out = []
    if off.error != on.error:
        for s in (off, on):
            if s.error:
                side = "on" if s.flag else "off"
                out.append(f"raises with the flag {side} only: {s.error}")
        return tuple(out)
    if off.error:
        return (f"raises either way: {off.error}",)
    if off.implementations and "call_hi_primitive" not in on.implementations:
        out.append(
            "the checkpoints stayed `remat2` with the flag on: this JAX reads jax_remat3 when "
            "jax.checkpoint wraps a function, and these were wrapped before the flag was set."
        )
    if not off.implementations:
        out.append("no jax.checkpoint in the function: the flag has nothing to change.")
    out += _residual_causes(off, on, policy)
    names_off = [r.argument for r in off.residuals.of_kind("argument")]
    names_on = [r.argument for r in on.residuals.of_kind("argument")]
    if names_off != names_on and len(names_off) == len(names_on):
        out.append(
            "arguments are listed under other names with the flag on (by position, not by "
            "parameter name): only the listing differs."
        )
    if off.barriers > on.barriers and policy == "everything_saveable" and not on.barriers:
        out.append(
            f"{off.barriers} optimization barrier(s) without the flag, none with it: jax_remat3 "
            "does not rematerialize under everything_saveable at all, so nothing is pinned."
        )
    elif off.barriers != on.barriers:
        out.append(
            f"{off.barriers} optimization barrier(s) without the flag, {on.barriers} with it: "
            "the implementations pin the recomputation's inputs differently (on some releases "
            "jax.checkpoint does not hand prevent_cse to jax_remat3)."
        )
    if (off.temp_bytes, off.flops) != (on.temp_bytes, on.flops):
        out.append(
            f"the compiled gradient changes: {_compiled(off)} without the flag, {_compiled(on)} "
            "with it; what a real step costs is the compiled program's to say."
        )
    if agree is False:
        out.append("gradients differ beyond rounding: a policy should change only what is kept.")
    return tuple(out)


def compare_remat3(
    f: Callable[..., Any],
    *args: Any,
    policy: Any = _UNSET,
    argnums: int | Sequence[int] = 0,
    prevent_cse: bool = True,
) -> Report:
    """Differentiate ``f(*args)`` with ``jax_remat3`` off and on, and compare the two.

    With ``policy`` given (``None`` included: keep nothing), ``f`` is wrapped in
    ``jax.checkpoint(f, policy=policy, prevent_cse=prevent_cse)`` under each setting of the flag;
    without it, ``f`` is taken as it is (its own ``jax.checkpoint``, ``nn.remat`` or
    ``nnx.remat`` inside). The residuals are those of the gradient with respect to every
    argument, as ``jax.ad_checkpoint.print_saved_residuals`` lists them; the gradients compared
    are taken with respect to ``args[argnums]``, weighting each output element by one. JAX's
    configuration is left as it was found, whatever happens.
    """
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    def checkpointed(fn: Callable[..., Any]) -> Callable[..., Any]:
        return jax.checkpoint(fn, policy=policy, prevent_cse=prevent_cse)

    wrap = None if policy is _UNSET else checkpointed

    kind = "given by the function" if policy is _UNSET else policy_kind(policy)
    off = _measure(f, args, nums, False, wrap)
    on = _measure(f, args, nums, True, wrap)
    agree, worst = _compare_gradients(off, on)
    return Report(kind, off, on, agree, worst, _differences(off, on, kind, agree))


# --- the check on the how-to guides' models ---------------------------------------------------


def scan_transformer_case(policy: Any) -> tuple[Callable[..., jax.Array], tuple[Any, ...]]:
    """``(loss, (params, x, y))``: the scan-transformer guide's loss, its block checkpointed with
    ``policy``, at the shared model's tiny size. The checkpoint is built when ``loss`` runs, so it
    sees the flag on every release."""
    from examples.howto import scan_transformer as st
    from examples.tools.models import SIZES, init_inputs, init_params

    cfg = SIZES["tiny"]
    setup = st.Setup("case", policy=policy)

    def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return st.loss_fn(cfg, setup)(params, x, y)

    x = init_inputs(cfg)
    return loss, (init_params(cfg), x, jax.random.normal(jax.random.key(2), x.shape))


def linen_case(policy: Any) -> tuple[Callable[..., jax.Array], tuple[Any, ...]]:
    """``(loss, (params,))``: the linen guide's transformer at the tiny size, each block lifted
    with ``nn.remat(Block, static_argnums=(2,), policy=policy)``, dropout on."""
    import flax.linen as nn

    from examples.howto import linen_training as lt
    from examples.howto.flax_steps import make_batch
    from examples.tools.models import SIZES

    cfg = SIZES["tiny"]
    block = nn.remat(lt.Block, static_argnums=(2,), policy=policy)
    model = lt.Transformer(layers=cfg.layers, width=cfg.width, heads=cfg.heads, block=block)
    batch = make_batch(cfg)
    key = lt.dropout_key()

    def loss(params: Any) -> jax.Array:
        return lt.loss_fn(model, params, batch, key)

    return loss, (lt.init_params(model, batch),)


def nnx_case(policy: Any) -> tuple[Callable[..., jax.Array], tuple[Any, ...]]:
    """``(loss, (params,))``: the NNX guide's transformer at the tiny size, each block's call
    wrapped in ``nnx.remat(Block.__call__, policy=policy)``; the loss is a function of the
    parameters (``nnx.split``), the rest of the state (dropout streams) held fixed."""
    from flax import nnx

    from examples.howto import nnx_training as nt
    from examples.howto.flax_steps import make_batch
    from examples.tools.models import SIZES

    cfg = SIZES["tiny"]
    batch = make_batch(cfg)
    model = nt.Transformer(cfg, rngs=nnx.Rngs(0))
    parts: Any = nnx.split(model, nnx.Param, ...)  # typed as a variadic tuple
    graphdef, params, rest = parts

    def loss(params: Any) -> jax.Array:
        m = nnx.merge(graphdef, params, rest, copy=True)
        m.block_call = nnx.remat(nt.Block.__call__, policy=policy)  # built when loss runs
        return nt.loss_fn(m, batch)

    return loss, (params,)
