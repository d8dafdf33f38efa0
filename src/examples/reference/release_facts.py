"""The facts of the page "Across JAX releases", each read off the installed JAX by running code.

:mod:`examples.reference.releases` records them, with the tests' outcome, once per release of the
matrix (``nox -s tests-jax``); nothing here is typed in. :func:`collect_facts` measures them all.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.notes import remat3 as next_remat
from examples.tools import compat, measure
from examples.tools.jaxprs import remat3, remat3_available
from examples.tutorial import traced as tutorial


def remat_primitive() -> str:
    """The primitive of the one equation that ``jax.checkpoint`` of a function traces to."""
    jaxpr = jax.make_jaxpr(jax.checkpoint(lambda x: x * x))(1.0).jaxpr
    if len(jaxpr.eqns) != 1:
        raise RuntimeError(f"jax.checkpoint traced to {len(jaxpr.eqns)} equations, not one")
    return str(jaxpr.eqns[0].primitive.name)


def _without_source(description: str) -> str:
    """``"output of sin from /x/y.py:3:9 (g)"`` -> ``"output of sin"``."""
    return description.split(" from ", 1)[0]


def _jax_listing(f: Callable[..., Any], *args: Any) -> list[str]:
    """JAX's own residual lines for ``f``, sources (machine paths) left out."""
    return [
        f"{aval.str_short(short_dtypes=True)} {_without_source(description)}"
        for aval, description in compat.jax_saved_residuals(f, *args)
    ]


def dots_residuals() -> list[str]:
    """JAX's own residual listing of the tutorial's ``f`` under the dots policy, paths stripped."""
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return _jax_listing(jax.checkpoint(tutorial.f, policy=policy), *tutorial.chain_inputs())


def public_names(module: Any) -> list[str]:
    return sorted(n for n in dir(module) if not n.startswith("_") and not _is_module(module, n))


def _is_module(owner: Any, name: str) -> bool:
    return isinstance(getattr(owner, name), type(jax))


def _outcome(call: Callable[[], Any], expected: Any = None) -> dict[str, str | None]:
    """``{"outcome", "error", "warning"}``: what one call did on the installed JAX.

    ``outcome`` is ``"accepted"`` (it ran; its result, if ``expected`` is given, was right),
    ``"wrong result"`` or ``"raises"`` (``error`` names the exception's type); ``warning``
    names the category of a warning it gave.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        error: str | None
        try:
            result = call()
        except Exception as err:  # the exception's type is the fact
            outcome, error = "raises", type(err).__name__
        else:
            right = expected is None or bool(jnp.allclose(result, expected))
            outcome, error = ("accepted" if right else "wrong result"), None
    warning = next((w.category.__name__ for w in caught), None)
    return {"outcome": outcome, "error": error, "warning": warning}


def _branch_on_x(x: jax.Array) -> jax.Array:
    return jnp.sin(x) if x > 0 else jnp.cos(x)  # Python control flow on the argument's value


def _branch_on_flag(x: jax.Array, flag: bool = True) -> jax.Array:
    return jnp.sin(x) if flag else jnp.cos(x)  # Python control flow on a static argument


def concrete_true() -> dict[str, str | None]:
    """``jax.checkpoint(f, concrete=True)`` on a function that branches on its argument."""
    checkpoint: Any = jax.checkpoint  # `concrete` is gone from its signature on jax 0.11 and later
    return _outcome(lambda: checkpoint(_branch_on_x, concrete=True)(2.0), jnp.sin(2.0))


def concrete_false() -> dict[str, str | None]:
    """``jax.checkpoint(jnp.sin, concrete=False)``: the old default, spelled out."""
    checkpoint: Any = jax.checkpoint
    return _outcome(lambda: checkpoint(jnp.sin, concrete=False)(2.0), jnp.sin(2.0))


def static_argnames(transform: Callable[..., Any]) -> dict[str, str | None]:
    """``transform(f, static_argnames=("flag",))(2.0, flag=False)`` where ``f`` branches on it.

    ``accepted`` means the flag was static (the result is ``cos``); a tracer error means the
    keyword was accepted and ignored; ``TypeError`` means it is not a keyword of ``transform``.
    """
    return _outcome(
        lambda: transform(_branch_on_flag, static_argnames=("flag",))(2.0, flag=False),
        jnp.cos(2.0),
    )


def _named_equation() -> Any:
    jaxpr = jax.make_jaxpr(lambda x: checkpoint_name(jnp.sin(x), "a"))(1.0).jaxpr
    (eqn,) = [e for e in jaxpr.eqns if e.primitive.name != "sin"]
    return eqn


def except_names_refuses_its_name() -> bool:
    """Does ``save_anything_except_these_names("a")`` answer "do not save" for a value named a?

    The policy is asked directly, with the equation ``checkpoint_name`` traces to.
    """
    eqn = _named_equation()
    policy = jax.checkpoint_policies.save_anything_except_these_names("a")
    avals = [v.aval for v in eqn.invars]
    return not policy(eqn.primitive, *avals, **eqn.params)


def except_names_bytes() -> dict[str, int]:
    """Bytes the forward pass keeps (arguments left out) for the tutorial's ``f_named``, under
    ``save_anything_except_these_names("a")`` and under ``everything_saveable``."""
    P = jax.checkpoint_policies

    def kept(policy: Any) -> int:
        f = jax.checkpoint(tutorial.f_named, policy=policy)
        return sum(
            aval.size * aval.dtype.itemsize
            for aval, description in compat.jax_saved_residuals(f, *tutorial.chain_inputs())
            if not description.startswith("from the argument")
        )

    return {
        "except_a": kept(P.save_anything_except_these_names("a")),
        "everything": kept(P.everything_saveable),
    }


def remat3_primitive() -> str | None:
    """What ``jax.checkpoint`` traces to under ``jax_remat3``; ``None`` without the flag."""
    if not remat3_available():
        return None
    with remat3(True):
        return remat_primitive()


def checkpoint_keywords() -> list[str]:
    """The keyword arguments ``jax.checkpoint`` declares (``concrete`` left it at some point)."""
    import inspect

    return sorted(
        name
        for name, p in inspect.signature(jax.checkpoint).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    )


# --- what the pages' statements rest on (issue 23: one release's answer is not a rule) -----------


def kept_by_autodiff(fn: Callable[[jax.Array], jax.Array]) -> list[str]:
    """What reverse mode keeps for ``fn`` elementwise on an 8 by 4 array, arguments left out:
    JAX's own listing (``print_saved_residuals``), e.g. ``["f32[8,4] output of tanh"]``."""
    x = jnp.linspace(-1.0, 1.0, 32, dtype=jnp.float32).reshape(8, 4)
    return [line for line in _jax_listing(lambda v: jnp.sum(fn(v)), x) if "argument" not in line]


def remat_prevent_cse_annotation() -> str:
    """How ``jax.remat`` declares ``prevent_cse`` (``jax.checkpoint`` takes a bool or a tuple)."""
    import inspect

    annotation = inspect.signature(jax.remat).parameters["prevent_cse"].annotation
    return str(getattr(annotation, "__name__", annotation))


def both_policies_with_offload() -> dict[str, str | None]:
    """``save_from_both_policies(nothing_saveable, offload_dot_with_no_batch_dims(...))`` as the
    policy of a traced gradient: some releases refuse an offloading side, others short-circuit."""
    P = jax.checkpoint_policies
    policy = P.save_from_both_policies(
        P.nothing_saveable, P.offload_dot_with_no_batch_dims("device", "pinned_host")
    )
    w = jnp.ones((4, 4))
    f = jax.checkpoint(lambda w, x: jnp.sum(jnp.tanh(x @ w)), policy=policy)
    return _outcome(lambda: jax.make_jaxpr(jax.grad(f))(w, jnp.ones((2, 4))))


def _products(text: str) -> int:
    """Matrix products in a program's text: ``stablehlo.dot_general`` as lowered, ``dot(`` as
    compiled (XLA's HLO)."""
    return text.count("stablehlo.dot_general") + len(re.findall(r"\sdot\(", text))


#: The straight-line stack of :func:`straight_line`: layers, batch, width.
DEPTH, BATCH, WIDTH = 8, 64, 128


def straight_line() -> dict[str, float]:
    """A straight-line stack of ``DEPTH`` ``tanh(h @ w)`` layers, one ``jax.checkpoint`` per layer,
    under ``jit``: the products in the lowered and the compiled program, and the compiled temporary
    memory against the same stack without checkpoints. Whether XLA keeps the recomputation here
    depends on where its pass that removes optimization barriers runs relative to CSE."""
    depth, batch, width = DEPTH, BATCH, WIDTH
    ws = [jnp.full((width, width), 0.01, jnp.float32) for _ in range(depth)]
    x = jnp.ones((batch, width), jnp.float32)

    def stack(layer: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
        def loss(ws: list[jax.Array], x: jax.Array) -> jax.Array:
            for w in ws:
                x = layer(w, x)
            return jnp.sum(x)

        return loss

    def layer(w: jax.Array, h: jax.Array) -> jax.Array:
        return jnp.tanh(h @ w)

    checkpointed, plain = jax.grad(stack(jax.checkpoint(layer))), jax.grad(stack(layer))
    lowered = jax.jit(checkpointed).lower(ws, x)
    return {
        "products_lowered": _products(str(lowered.as_text())),
        "products_compiled": _products(str(lowered.compile().as_text())),
        "products_without_checkpoint": _products(
            str(jax.jit(plain).lower(ws, x).compile().as_text())
        ),
        "temp_vs_plain": round(
            measure.compiled_stats(checkpointed, ws, x).temp_bytes
            / measure.compiled_stats(plain, ws, x).temp_bytes,
            2,
        ),
    }


#: Each fact of the page, and the function that measures it; the keys of a record's "facts".
FACTS: dict[str, Callable[[], Any]] = {
    "remat_primitive": remat_primitive,
    "dots_residuals": dots_residuals,
    "policy_names": compat.policy_names,
    "ad_checkpoint_names": lambda: public_names(jax.ad_checkpoint),
    "remat_is_checkpoint": lambda: jax.remat is jax.checkpoint,
    "checkpoint_keywords": checkpoint_keywords,
    "concrete_true": concrete_true,
    "concrete_false": concrete_false,
    "checkpoint_static_argnames": lambda: static_argnames(jax.checkpoint),
    "remat_static_argnames": lambda: static_argnames(jax.remat),
    "except_names_refuses": except_names_refuses_its_name,
    "except_names_bytes": except_names_bytes,
    "remat3": remat3_primitive,
    "tanh_kept": lambda: kept_by_autodiff(jnp.tanh),
    "remat_prevent_cse": remat_prevent_cse_annotation,
    "both_policies_with_offload": both_policies_with_offload,
    "straight_line": straight_line,
    "remat3_points": lambda: next_remat.remat3_points(),
}


def collect_facts() -> dict[str, Any]:
    """Every fact of the page, measured on the installed JAX."""
    return {key: measure() for key, measure in FACTS.items()}


def package_bound(distribution: str) -> str:
    """This package's requirement on ``distribution``, as installed: ``"jax>=0.5.3"``."""
    import importlib.metadata

    for requirement in importlib.metadata.requires("jax-remat-guide-examples") or ():
        spec = requirement.split(";")[0].strip()
        if re.match(rf"{re.escape(distribution)}\s*[<>=!~]", spec):
            return spec.replace(" ", "")
    raise LookupError(f"jax-remat-guide-examples does not require {distribution}")
