"""What the residuals check compares: the values a function's backward pass keeps, exactly.

A kept value is described by its kind (argument or computed), its type (shape and dtype) and,
for a computed one, the primitive that computed it or its ``checkpoint_name`` name
(:func:`residual_key`). The check compares two listings as multisets of those
(:func:`residual_difference`), and says what one keeps that the other does not. A listing shows
a named value by its name only, so the names are compared once more by the primitive that
computed the value they carry (:func:`named_values`): naming ``tanh(x @ w)`` where the reference
names ``x @ w`` keeps an array of the same shape under the same name, and another value.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools.jaxprs import checkpoint_name_of, equation_jaxprs, jit_inlined, open_jaxpr
from examples.tools.residuals import Residuals, saved_residuals

# --- residuals ------------------------------------------------------------------------------------


def residual_listing(fn: Callable[..., Any], *arrays: Any) -> Residuals:
    """``saved_residuals`` with ``jit`` inlined, so a jitted solution lists what it keeps inside
    (:func:`examples.tools.jaxprs.jit_inlined`; a scan stays a scan, so one carry per layer is
    listed as one stacked array)."""
    return saved_residuals(jit_inlined(fn, *arrays), *arrays)


#: Primitives whose outputs a residual listing reports for a checkpoint nested in another: the
#: value kept is one of the inner checkpoint's, whose primitive the listing does not show.
NESTED_CHECKPOINT_OUTPUTS = frozenset({"remat2", "checkpoint", "remat", "call_hi_primitive"})


def residual_key(r: Any) -> tuple[str, str, str | None]:
    """(kind, type, primitive or name) of one kept value: what it is and what it costs.

    Argument names and source lines are left out (under ``jax_remat3`` arguments are named
    otherwise); the primitive that computed a value and a ``checkpoint_name`` name count.
    """
    return (r.kind, r.type_str, None if r.kind == "argument" else r.detail)


def residual_signature(listing: Residuals) -> collections.Counter[tuple[str, str, str | None]]:
    """The multiset of :func:`residual_key` over a listing, integer values left out
    (:func:`is_index`)."""
    return collections.Counter(residual_key(r) for r in listing if not is_index(r))


def is_index(r: Any) -> bool:
    """Whether a kept value is an integer array: a loop's indices (``fori_loop`` keeps its
    counter for the backward pass, a scan over ``jnp.arange`` keeps the ``iota``). It carries no
    gradient, costs a few bytes a layer, and says nothing about the checkpoint, so the residuals
    check does not compare it."""
    return bool(jnp.issubdtype(r.dtype, jnp.integer))


def residual_difference(
    mine: Residuals, theirs: Residuals
) -> tuple[collections.Counter[Any], collections.Counter[Any]]:
    """(kept only by ``mine``, kept only by ``theirs``), compared exactly as multisets of
    :func:`residual_key`. A value that ``mine`` reports as the output of a nested checkpoint
    matches a value of ``theirs`` of the same kind and type, whatever computed it there; a
    reshaped input matches the input; a computed value in another layout (same primitive or
    name, dtype and size) matches it."""
    extra = residual_signature(mine) - residual_signature(theirs)
    missing = residual_signature(theirs) - residual_signature(mine)
    _pair_off(
        extra,
        missing,
        takes=lambda key: key[2] in NESTED_CHECKPOINT_OUTPUTS,
        matches=lambda key, m: m[:2] == key[:2] and m[0] == "output",
    )
    # An input given another shape (``x[None]``, ``bs[:, None, :]``) before the code that keeps it
    # is the same data: a reshaped or broadcast value of an input's dtype and size matches it.
    _pair_off(
        extra,
        missing,
        takes=lambda key: key[2] in RESHAPES,
        matches=lambda key, m: m[0] == "argument" and _same_data(key, m),
    )
    # A computed value kept in another layout (``x[None] @ w`` keeps ``f32[1,3]`` where
    # ``x @ w`` keeps ``f32[3]``; a transposed pipeline keeps ``f32[3,1]``) is the same value:
    # the same primitive or name, dtype and number of elements.
    _pair_off(
        extra,
        missing,
        takes=lambda key: key[0] != "argument",
        matches=lambda key, m: (m[0], m[2]) == (key[0], key[2]) and _same_data(key, m),
    )
    return +extra, +missing


def _pair_off(
    extra: collections.Counter[Any],
    missing: collections.Counter[Any],
    takes: Callable[[Any], bool],
    matches: Callable[[Any, Any], bool],
) -> None:
    """Count each kept-only-by-mine value that ``takes`` accepts as the first kept-only-by-theirs
    value it ``matches`` (both in sorted order), removing the pair from the two multisets."""
    for key in sorted((k for k in extra.elements() if takes(k)), key=str):
        match = next((m for m in sorted(+missing, key=str) if matches(key, m)), None)
        if match is not None:
            extra[key] -= 1
            missing[match] -= 1


def _same_data(key: Any, other: Any) -> bool:
    """Whether two residual keys have the same dtype and number of elements."""
    return _dtype_and_size(key[1]) == _dtype_and_size(other[1])


#: Primitives that give a value another shape without computing: their output, kept where the
#: reference keeps an input of the same dtype and size, is that input.
RESHAPES = frozenset({"reshape", "broadcast_in_dim", "expand_dims", "squeeze"})


def _dtype_and_size(type_str: str) -> tuple[str, int]:
    """``"f32[1,3]"`` -> ``("f32", 3)``: the dtype and the number of elements."""
    dtype, _, dims = type_str.partition("[")
    sizes = [int(d) for d in dims.rstrip("]").split(",") if d.strip()]
    return dtype, math.prod(sizes)


def same_arrays(mine: Residuals, theirs: Residuals) -> bool:
    """Whether both keep arrays of the same shapes, dtypes and names, whatever computed them."""
    return _shapes(mine) == _shapes(theirs)


def _shapes(listing: Residuals) -> collections.Counter[tuple[str, str, str | None]]:
    """(argument or computed, type, name) per kept value: what it costs, whatever computed it."""
    return collections.Counter(
        (
            "argument" if r.kind == "argument" else "computed",
            r.type_str,
            r.detail if r.kind == "named" else None,
        )
        for r in listing
    )


def named_values(fn: Callable[..., Any], *arrays: Any) -> collections.Counter[tuple[str, str]]:
    """``(name, what computed the named value)`` for every ``checkpoint_name`` in the traced
    program of ``fn`` (``jit`` inlined, nested jaxprs included; either remat implementation): the
    producing equation's primitive, or ``"an input"`` where the value enters its jaxpr."""
    found: collections.Counter[tuple[str, str]] = collections.Counter()

    def visit(jaxpr: Any) -> None:
        made_by: dict[Any, str] = {}
        for eqn in open_jaxpr(jaxpr).eqns:
            name = checkpoint_name_of(eqn)
            if name is not None and eqn.invars:
                found[(name, made_by.get(eqn.invars[0], "an input"))] += 1
            for out in eqn.outvars:
                made_by[out] = eqn.primitive.name
            for sub in equation_jaxprs(eqn):
                visit(sub)

    visit(jax.make_jaxpr(jit_inlined(fn, *arrays))(*arrays))
    return found


def named_difference(
    mine: collections.Counter[tuple[str, str]], theirs: collections.Counter[tuple[str, str]]
) -> str | None:
    """Where a name that both give carries a value computed otherwise, one sentence; else None."""
    lines = []
    for name in sorted({n for n, _ in theirs} & {n for n, _ in mine}):
        ours = sorted(what for n, what in mine.elements() if n == name)
        ref = sorted(what for n, what in theirs.elements() if n == name)
        if ours != ref:
            lines.append(
                f"your `{name}` names the output of {' and '.join(ours)}, where the reference "
                f"names the output of {' and '.join(ref)}"
            )
    return "; ".join(lines) or None


#: (primitive, type) of values a function computes from none of its array arguments: in the
#: model problems, the parameters it initialises itself (:func:`parameter_values`).
Parameters = collections.Counter[tuple[str, str]]


def parameter_values(fn: Callable[..., Any], *arrays: Any) -> Parameters:
    """``(primitive, type)`` of every value the traced ``fn`` computes from none of ``arrays``
    (``jit`` inlined, top level): where the function makes its model, its parameters (a kernel is
    the ``mul`` that scaled it at initialisation, a zero bias a ``broadcast_in_dim``). A listing
    names a kept value by the primitive that computed it; these are better called parameters."""
    found: Parameters = collections.Counter()

    def visit(jaxpr: Any, depends_in: list[bool]) -> list[bool]:
        depends = {v for v, d in zip(jaxpr.invars, depends_in, strict=True) if d}
        for eqn in jaxpr.eqns:
            flags = [type(v).__name__ != "Literal" and v in depends for v in eqn.invars]
            subs = (
                [open_jaxpr(j) for j in equation_jaxprs(eqn)]
                if eqn.primitive.name in _CALLS
                else []
            )
            if len(subs) == 1 and len(subs[0].invars) == len(flags):
                outs = visit(subs[0], flags)
            else:
                outs = [any(flags)] * len(eqn.outvars)
                if not any(flags):
                    for out in eqn.outvars:
                        found[(eqn.primitive.name, _short_type(out.aval))] += 1
            depends.update(v for v, d in zip(eqn.outvars, outs, strict=True) if d)
        return [type(v).__name__ != "Literal" and v in depends for v in jaxpr.outvars]

    jaxpr = jax.make_jaxpr(jit_inlined(fn, *arrays))(*arrays).jaxpr
    visit(jaxpr, [True] * len(jaxpr.invars))
    return found


#: Primitives that call a jaxpr with their operands as its arguments (``jit``, a checkpoint):
#: :func:`parameter_values` follows each argument's dependence into it.
_CALLS = frozenset(
    {"pjit", "jit", "closed_call", "core_call", "remat2", "checkpoint", "call_hi_primitive"}
)


def _short_type(aval: Any) -> str:
    """``"f32[3,4]"``, as a residual listing writes a type."""
    try:
        return str(aval.str_short(short_dtypes=True))
    except TypeError:  # a release whose str_short takes no such argument
        return str(aval.str_short())


def is_parameter(key: tuple[str, str, str | None], parameters: Parameters | None) -> bool:
    """Whether a kept value (a :func:`residual_key`) is one of ``parameters``."""
    kind, type_str, detail = key
    return bool(parameters) and kind == "output" and (detail or "", type_str) in parameters


#: JAX's internal names for what computed a kept value, said so that a learner can place them.
READABLE = {
    "custom_jvp_call": "custom_jvp_call (a function with its own derivative rule, such as relu)",
    "eval_jaxpr": "eval_jaxpr (a value from inside a nested transformation, such as a scan "
    "under a checkpoint)",
    "closed_call": "closed_call (a value from inside a nested transformation, such as a scan "
    "under a checkpoint)",
}


def _described(key: tuple[str, str, str | None], parameters: Parameters | None) -> str:
    kind, type_str, detail = key
    if kind == "argument":
        return f"an input {type_str}"
    if is_parameter(key, parameters):
        return f"a parameter {type_str} (made by {detail})"
    what = detail or kind
    if what in READABLE:
        name, _, why = READABLE[what].partition(" ")
        return f"{name} {type_str} {why}"
    return f"{what} {type_str}"


def describe_keys(keys: collections.Counter[Any], parameters: Parameters | None = None) -> str:
    """``"dot_general f32[4,4], an input f32[2]"``: an argument kept is called an input, as in
    :func:`describe_computed`, which lists what the function computed apart from its inputs; a
    value computed from no input, one of ``parameters``, is called a parameter."""
    return ", ".join(
        _described(key, parameters) + (f" ×{n}" if n > 1 else "")
        for key, n in sorted(keys.items(), key=lambda kv: (kv[0][2] or kv[0][0], kv[0][1]))
    )


def describe_computed(listing: Residuals, parameters: Parameters | None = None) -> str:
    """What the function computed and the backward pass keeps, its inputs left out."""
    computed = collections.Counter(
        _described(residual_key(r), parameters) for r in listing.excluding_arguments()
    )
    if not computed:
        return "nothing it computed (only its inputs)"
    return ", ".join(what + (f" ×{n}" if n > 1 else "") for what, n in sorted(computed.items()))
