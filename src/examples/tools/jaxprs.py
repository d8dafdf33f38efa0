"""Walk jaxprs, and find JAX's checkpoint in them, under either remat implementation.

Every part of the site that reads a traced program goes through this module: the forward and
backward viewer (:mod:`examples.tutorial.fwd_bwd`), the learner's checker
(:mod:`examples.problems`), the policy reference (host transfers) and the migration notes (which
primitive a checkpoint traces to).

``jax.checkpoint`` traces to one equation that carries the checkpointed function as a jaxpr and
its policy. What that equation looks like depends on the implementation:

- the default one (JAX PR 11830, "new" in 2022) binds the primitive ``remat2`` with the
  parameters ``jaxpr``, ``policy``, ``prevent_cse`` and ``differentiated``;
- JAX's next implementation, behind ``jax.config.update("jax_remat3", True)`` in the releases
  that have the flag, stages a generic ``call_hi_primitive`` whose ``_prim`` parameter is a
  ``RematTraced`` object holding ``jaxpr`` and ``policy``.

:func:`remat_sites` finds both by what they carry, not by their names, so a renamed primitive is
still found; each site records the equations around it (a checkpoint in a ``scan``'s body, or one
around a ``scan``). :func:`checkpoint_names` finds the values named with ``checkpoint_name``, which
also trace differently under the two implementations.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

import jax
from jax.extend import core as jex_core

from examples.tools import compat

#: ``jax.extend.core.ClosedJaxpr``: a class of its own up to jax 0.11, an alias of ``Jaxpr`` from
#: jax 0.12 on, which its type stubs do not re-export (hence the lookup by name).
ClosedJaxpr: Any = getattr(jex_core, "ClosedJaxpr")  # noqa: B009

# --- walking -------------------------------------------------------------------------------------


def open_jaxpr(jaxpr: Any) -> Any:
    """A ``Jaxpr`` from a ``Jaxpr`` or a ``ClosedJaxpr``."""
    return jaxpr.jaxpr if isinstance(jaxpr, ClosedJaxpr) else jaxpr


def sub_jaxprs(value: Any) -> Iterator[Any]:
    """The jaxprs held by one equation parameter: a jaxpr, a closed jaxpr, a sequence of them, or
    a remat3 ``RematTraced`` object (whose ``jaxpr`` is the checkpointed function)."""
    if isinstance(value, ClosedJaxpr | jex_core.Jaxpr):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from sub_jaxprs(item)
    else:
        inner = _remat3_parts(value)
        if inner is not None:
            yield inner[0]


def equation_jaxprs(eqn: Any) -> Iterator[Any]:
    """Every jaxpr nested directly in one equation's parameters."""
    for value in eqn.params.values():
        yield from sub_jaxprs(value)


def walk(jaxpr: Any, depth: int = 0) -> Iterator[tuple[Any, int]]:
    """Every equation of ``jaxpr`` and of the jaxprs nested in it, with its nesting depth."""
    for eqn in open_jaxpr(jaxpr).eqns:
        yield eqn, depth
        for sub in equation_jaxprs(eqn):
            yield from walk(sub, depth + 1)


def primitive_counts(jaxpr: Any) -> collections.Counter[str]:
    """Equations per primitive name in ``jaxpr`` and every jaxpr nested in its parameters."""
    return collections.Counter(eqn.primitive.name for eqn, _ in walk(jaxpr))


def count_primitive(jaxpr: Any, name: str) -> int:
    return primitive_counts(jaxpr)[name]


# --- the checkpoint ------------------------------------------------------------------------------


def _remat3_parts(value: Any) -> tuple[Any, Any] | None:
    """``(jaxpr, policy)`` of a remat3 ``RematTraced`` parameter value, else ``None``."""
    if type(value).__name__ != "RematTraced":
        return None
    jaxpr, policy = getattr(value, "jaxpr", None), getattr(value, "policy", None)
    if not isinstance(jaxpr, ClosedJaxpr | jex_core.Jaxpr):
        return None
    return jaxpr, policy


def remat_parts(eqn: Any) -> tuple[Any, Any] | None:
    """``(jaxpr, policy)`` if ``eqn`` is a checkpoint under either implementation, else ``None``.

    A ``policy`` of ``None`` means JAX's default: keep nothing but the inputs.
    """
    params = eqn.params
    # remat2 (and any renamed successor) carries these three parameters together; nothing else does.
    if {"jaxpr", "policy", "prevent_cse"} <= set(params):
        return params["jaxpr"], params["policy"]
    held = _remat3_value(eqn)
    return None if held is None else _remat3_parts(held)


def _remat3_value(eqn: Any) -> Any | None:
    """The remat3 ``RematTraced`` object among ``eqn``'s parameters, else ``None``."""
    return next((v for v in eqn.params.values() if _remat3_parts(v) is not None), None)


def is_remat(eqn: Any) -> bool:
    return remat_parts(eqn) is not None


@dataclasses.dataclass(frozen=True)
class RematSite:
    """One checkpoint equation, wherever it sits in a traced function."""

    primitive: str  #: "remat2", or "call_hi_primitive" under jax_remat3
    policy: Any  #: the policy object; ``None`` means keep nothing
    depth: int  #: how many checkpoints surround this one
    products: int  #: ``dot_general`` equations inside it, nested jaxprs included
    jaxpr: Any = dataclasses.field(repr=False, compare=False, default=None)
    #: the primitives of the equations that hold it, outermost first: ``("scan",)`` for a
    #: checkpoint in a scan's body, ``("jit", "scan", "remat2")`` for one nested deeper
    within: tuple[str, ...] = ()

    def contains(self, primitive: str) -> int:
        """How many ``primitive`` equations the checkpointed function holds (nested included)."""
        return count_primitive(self.jaxpr, primitive) if self.jaxpr is not None else 0


def live_equations(jaxpr: Any) -> Any:
    """``jaxpr`` (open) without the equations whose outputs nothing it returns reads, by JAX's own
    dead-code elimination (``dce_jaxpr``, an internal function; where it is missing or refuses
    the jaxpr, the jaxpr unchanged). A checkpoint around a value that is thrown away (a model's
    ``init`` inside the function, say) is gone from the result: it does nothing for a gradient."""
    jaxpr = open_jaxpr(jaxpr)
    try:
        from jax._src.interpreters import partial_eval as pe

        live, _ = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars), instantiate=True)
    except Exception:
        return jaxpr
    return live


def remat_sites(jaxpr: Any, depth: int = 0, within: tuple[str, ...] = ()) -> list[RematSite]:
    """Every checkpoint equation in ``jaxpr`` and the jaxprs nested in its equations."""
    found: list[RematSite] = []
    for eqn in open_jaxpr(jaxpr).eqns:
        parts = remat_parts(eqn)
        inner_depth = depth
        if parts is not None:
            inner, policy = parts
            found.append(
                RematSite(
                    primitive=eqn.primitive.name,
                    policy=policy,
                    depth=depth,
                    products=count_primitive(inner, "dot_general"),
                    jaxpr=inner,
                    within=within,
                )
            )
            inner_depth = depth + 1
        for sub in equation_jaxprs(eqn):
            found.extend(remat_sites(sub, inner_depth, (*within, eqn.primitive.name)))
    return found


# --- names given with checkpoint_name ------------------------------------------------------------


def checkpoint_name_of(eqn: Any) -> str | None:
    """The name if ``eqn`` is ``checkpoint_name``'s, under either implementation, else ``None``.

    By default ``checkpoint_name(x, "h")`` traces to the primitive ``name`` with the parameter
    ``name="h"``; under ``jax_remat3`` to a ``call_hi_primitive`` whose ``_prim`` is a
    ``CheckpointName`` carrying ``params={"name": "h"}``.
    """
    if eqn.primitive.name == "name" and isinstance(eqn.params.get("name"), str):
        return str(eqn.params["name"])
    for value in eqn.params.values():
        if type(value).__name__ == "CheckpointName":
            name = getattr(value, "params", {}).get("name")
            if isinstance(name, str):
                return name
    return None


def checkpoint_names(jaxpr: Any) -> collections.Counter[str]:
    """How often each ``checkpoint_name`` name occurs in ``jaxpr`` and its nested jaxprs."""
    return collections.Counter(
        name for eqn, _ in walk(jaxpr) if (name := checkpoint_name_of(eqn)) is not None
    )


def remat3_available() -> bool:
    """Whether the installed JAX has the ``jax_remat3`` flag (JAX's next remat implementation)."""
    return hasattr(jax.config, "jax_remat3")


def remat3_enabled() -> bool:
    return bool(getattr(jax.config, "jax_remat3", False))


@contextlib.contextmanager
def config_value(name: str, value: Any) -> Iterator[None]:
    """Set the JAX config option ``name`` to ``value`` inside the block; put back the value found
    on entry on every exit, an exception's included."""
    before = getattr(jax.config, name)
    jax.config.update(name, value)
    try:
        yield
    finally:
        jax.config.update(name, before)


@contextlib.contextmanager
def remat3(enabled: bool = True) -> Iterator[None]:
    """Trace with ``jax_remat3`` set to ``enabled`` inside the block; restore it afterwards.

    Raises ``RuntimeError`` on a JAX without the flag.
    """
    if not remat3_available():
        raise RuntimeError(f"jax {jax.__version__} has no jax_remat3 flag")
    with config_value("jax_remat3", enabled):
        yield


def remat_primitive_name() -> str:
    """The name of the primitive ``jax.checkpoint`` traces to in this process, read off a trace.

    ``remat2`` by default (``remat`` before 2022); ``call_hi_primitive`` under ``jax_remat3``.
    """
    jaxpr = jax.make_jaxpr(jax.checkpoint(lambda x: x * x))(1.0)
    (site,) = [eqn for eqn in jaxpr.jaxpr.eqns if is_remat(eqn)]
    return str(site.primitive.name)


def traced_remat_sites(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> list[RematSite]:
    """:func:`remat_sites` of ``jax.make_jaxpr(fn)(*args, **kwargs)``."""
    return remat_sites(jax.make_jaxpr(fn)(*args, **kwargs).jaxpr)


# --- evaluating a traced function with jit inlined ---------------------------------------------

#: The names ``jax.jit`` has traced to (``pjit`` before JAX 0.7, ``jit`` since).
JIT_PRIMITIVES = frozenset({"pjit", "jit"})


def _eval_inlining_jit(jaxpr: Any, consts: Any, args: Any) -> list[Any]:
    """Evaluate ``jaxpr`` equation by equation, as ``jax.core.eval_jaxpr`` does, except that a
    ``jit`` equation is evaluated through its own jaxpr, inline, instead of being bound, and a
    checkpoint (either implementation) is applied again, with its policy and ``prevent_cse``, to
    its own jaxpr evaluated the same way: a ``jit`` inside a checkpoint is inlined too."""
    env: dict[Any, Any] = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jex_core.Literal) else env[atom]

    for var, value in zip(jaxpr.constvars, consts, strict=True):
        env[var] = value
    for var, value in zip(jaxpr.invars, args, strict=True):
        env[var] = value
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        inner = eqn.params.get("jaxpr")
        if eqn.primitive.name in JIT_PRIMITIVES and isinstance(inner, ClosedJaxpr):
            outs = _eval_inlining_jit(inner.jaxpr, inner.consts, invals)
        elif (again := _checkpoint_to_apply_again(eqn)) is not None:
            body_jaxpr, policy, prevent_cse, made_by_remat3 = again
            body = functools.partial(_eval_body, body_jaxpr)
            # Applied again by the implementation that made it, whatever the flag says now (a
            # function may set jax_remat3 around its own call and put it back).
            same = made_by_remat3 == remat3_enabled()
            with contextlib.nullcontext() if same else remat3(made_by_remat3):
                outs = jax.checkpoint(body, policy=policy, prevent_cse=prevent_cse)(*invals)
        else:
            outs = compat.bind_equation(eqn, invals)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        for var, value in zip(eqn.outvars, outs, strict=True):
            env[var] = value
    return [read(v) for v in jaxpr.outvars]


def _checkpoint_to_apply_again(eqn: Any) -> tuple[Any, Any, Any, bool] | None:
    """``(jaxpr, policy, prevent_cse, made by jax_remat3)`` of a checkpoint equation (either
    implementation) whose jaxpr takes every value as an argument, flat, as the equation does;
    else ``None``."""
    parts = remat_parts(eqn)
    if parts is None:
        return None
    jaxpr, policy = parts
    held = _remat3_value(eqn)
    # Under remat3 the object holds prevent_cse (jax 0.10's holds none: its barrier is always on).
    prevent_cse = eqn.params["prevent_cse"] if held is None else getattr(held, "prevent_cse", True)
    if isinstance(jaxpr, ClosedJaxpr):
        if jaxpr.consts:
            return None
        jaxpr = jaxpr.jaxpr
    if not isinstance(jaxpr, jex_core.Jaxpr) or jaxpr.constvars:
        return None
    if len(jaxpr.invars) != len(eqn.invars) or len(jaxpr.outvars) != len(eqn.outvars):
        return None
    return jaxpr, policy, prevent_cse, held is not None


def _eval_body(jaxpr: Any, *args: Any) -> list[Any]:
    return _eval_inlining_jit(jaxpr, [], list(args))


def jit_inlined(fn: Callable[..., Any], *args: Any) -> Callable[..., Any]:
    """``fn`` as a function of arguments shaped like ``args``, with every ``jax.jit`` inside it
    evaluated inline, at any depth outside other transformations and inside checkpoints (a
    jitted function that a checkpoint wraps: the checkpoint is applied again around its body).

    What a jitted function keeps for its backward pass is listed as the outputs of the jitted
    function; inlined, the listing names the values inside it. Unlike ``jax.disable_jit()``,
    this leaves ``scan`` and other loops as they are (``disable_jit`` unrolls them in Python).
    """
    closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    out_tree = jax.tree.structure(shape)

    def inlined(*values: Any) -> Any:
        flat = _eval_inlining_jit(closed.jaxpr, closed.consts, jax.tree.leaves(values))
        return jax.tree.unflatten(out_tree, flat)

    return inlined
