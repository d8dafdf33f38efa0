"""What the residuals check compares: the values a function's backward pass keeps, exactly.

A kept value is described by its kind (argument or computed), its type (shape and dtype) and,
for a computed one, the primitive that computed it or its ``checkpoint_name`` name
(:func:`residual_key`). The check compares two listings as multisets of those
(:func:`residual_difference`), and says what one keeps that the other does not.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from examples.tools.jaxprs import jit_inlined
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
    """The multiset of :func:`residual_key` over a listing."""
    return collections.Counter(residual_key(r) for r in listing)


def residual_difference(
    mine: Residuals, theirs: Residuals
) -> tuple[collections.Counter[Any], collections.Counter[Any]]:
    """(kept only by ``mine``, kept only by ``theirs``), compared exactly as multisets of
    :func:`residual_key`. A value that ``mine`` reports as the output of a nested checkpoint
    matches a value of ``theirs`` of the same kind and type, whatever computed it there."""
    extra = residual_signature(mine) - residual_signature(theirs)
    missing = residual_signature(theirs) - residual_signature(mine)
    for key in sorted((k for k in extra.elements() if k[2] in NESTED_CHECKPOINT_OUTPUTS), key=str):
        match = next(
            (m for m in sorted(+missing, key=str) if m[:2] == key[:2] and m[0] == "output"), None
        )
        if match is not None:
            extra[key] -= 1
            missing[match] -= 1
    return +extra, +missing


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


def describe_keys(keys: collections.Counter[Any]) -> str:
    return ", ".join(
        f"{detail or kind} {type_str}" + (f" ×{n}" if n > 1 else "")
        for (kind, type_str, detail), n in sorted(
            keys.items(), key=lambda kv: (kv[0][2] or kv[0][0], kv[0][1])
        )
    )


def describe_computed(listing: Residuals) -> str:
    computed = collections.Counter(
        f"{r.detail or r.kind} {r.type_str}" for r in listing.excluding_arguments()
    )
    if not computed:
        return "nothing it computed (only its inputs)"
    return ", ".join(what + (f" ×{n}" if n > 1 else "") for what, n in sorted(computed.items()))
