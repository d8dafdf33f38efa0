"""How many bytes a traced gradient holds at its worst moment, if each value is freed after its
last use.

``jax.checkpoint`` changes the program JAX builds: what the forward pass computes, what it hands
to the backward pass, what the backward pass recomputes. :func:`peak_bytes` measures that program
directly. It takes the jaxpr of ``jax.grad(fn)``, the forward and backward passes in the order
JAX emits them, inlines every checkpoint equation (its recomputation runs where the equation
sits), and walks the equations once: an equation's outputs are allocated, and a value is freed
right after the last equation that reads it. The peak is the largest total of computed values
alive at any one equation. Arguments are left out (they are alive anyway).

This is the memory of an executor that frees eagerly and keeps JAX's order. It is not what XLA
allocates for the compiled program: XLA reorders, fuses and may undo a checkpoint (the tutorial
measures that separately). Loops are not supported: a ``scan`` or ``while`` equation raises.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.extend import core as jex_core

from examples.tools import compat
from examples.tools.jaxprs import open_jaxpr, remat_parts, sub_jaxprs

#: Primitives that only call a jaxpr on their operands: inlined like a checkpoint.
_CALLS = {"pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call"}


@dataclasses.dataclass(frozen=True)
class _Op:
    reads: tuple[Any, ...]
    writes: tuple[tuple[Any, int], ...]  #: (value key, bytes)


def _nbytes(aval: Any) -> int:
    return int(math.prod(aval.shape)) * int(aval.dtype.itemsize)


def _flatten(jaxpr: Any, env: dict[Any, Any], scope: Any, ops: list[_Op]) -> None:
    """Append the equations of ``jaxpr`` to ``ops``, inlining checkpoints and plain calls.

    ``env`` maps this jaxpr's variables to value keys of the outermost program; values defined
    here get the key ``(scope, var)``.
    """

    def key(v: Any) -> Any:
        if isinstance(v, jex_core.Literal):
            return None
        return env.get(v, (scope, v))

    for eqn in jaxpr.eqns:
        inner = _inlined_jaxpr(eqn)
        if inner is not None:
            inner = open_jaxpr(inner)
            inner_scope = next(_SCOPES)
            inner_env = dict(zip(inner.invars, [key(v) for v in eqn.invars], strict=True))
            _flatten(inner, inner_env, inner_scope, ops)
            for outer_v, inner_v in zip(eqn.outvars, inner.outvars, strict=True):
                inner_key = (
                    None
                    if isinstance(inner_v, jex_core.Literal)
                    else inner_env.get(inner_v, (inner_scope, inner_v))
                )
                env[outer_v] = inner_key
            continue
        if any(True for value in eqn.params.values() for _ in sub_jaxprs(value)):
            raise ValueError(
                f"peak_bytes does not follow the {eqn.primitive.name!r} equation (a loop or a "
                "branch); it measures straight-line programs only"
            )
        reads = tuple(k for k in map(key, eqn.invars) if k is not None)
        writes = tuple(
            ((scope, v), _nbytes(v.aval)) for v in eqn.outvars if not isinstance(v, compat.DropVar)
        )
        dropped = sum(_nbytes(v.aval) for v in eqn.outvars if isinstance(v, compat.DropVar))
        if dropped:  # an output nobody reads is still written, then freed at once
            writes += (((scope, object()), dropped),)
        ops.append(_Op(reads, writes))


_SCOPES = itertools.count()


def _inlined_jaxpr(eqn: Any) -> Any | None:
    parts = remat_parts(eqn)
    if parts is not None:
        return parts[0]
    if eqn.primitive.name in _CALLS:
        for name in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
            if name in eqn.params:
                return eqn.params[name]
    return None


def program_peak_bytes(closed: Any) -> int:
    """Peak bytes of computed values alive in ``closed`` (a jaxpr), freeing after last use."""
    jaxpr = open_jaxpr(closed)
    ops: list[_Op] = []
    top = next(_SCOPES)
    env: dict[Any, Any] = {v: None for v in [*jaxpr.invars, *jaxpr.constvars]}
    _flatten(jaxpr, env, top, ops)
    outputs = {env.get(v, (top, v)) for v in jaxpr.outvars if not isinstance(v, jex_core.Literal)}
    last_read: dict[Any, int] = {}
    for i, op in enumerate(ops):
        for k in op.reads:
            last_read[k] = i
    live: dict[Any, int] = {}
    peak = 0
    for i, op in enumerate(ops):
        for k, nbytes in op.writes:
            live[k] = nbytes
        peak = max(peak, sum(live.values()))
        for k in [*op.reads, *(k for k, _ in op.writes)]:
            if k in live and k not in outputs and last_read.get(k, -1) <= i:
                del live[k]
    return peak


def peak_bytes(fn: Callable[..., Any], *args: Any) -> int:
    """Peak bytes held by ``jax.grad`` of ``sum(fn(*args))`` with respect to the first argument,
    in JAX's order, each value freed after its last use (arguments not counted)."""
    grad = jax.grad(lambda *a: jnp.sum(fn(*a)))
    return program_peak_bytes(jax.make_jaxpr(grad)(*args))
