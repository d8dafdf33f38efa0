"""Section 3c of the migration notes (``docs/notes/new-checkpoint-implementation.md``):
computing with a checkpointed function's static arguments while tracing, with and without
``jax.ensure_compile_time_eval``. Tested in ``tests/notes/test_compile_time_eval.py``; the
page's other points are :mod:`examples.notes.new_checkpoint`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp


@partial(jax.checkpoint, static_argnums=(1,))
def scaled_by_sum_of_squares(x: jax.Array, n: int) -> jax.Array:
    """Scales ``x`` by 0² + 1² + ... + (n-1)², a number Python needs while tracing."""
    with jax.ensure_compile_time_eval():
        total = int(jnp.sum(jnp.arange(n) ** 2))  # concrete: computed now, not staged out
    return x * total


@partial(jax.checkpoint, static_argnums=(1,))
def scaled_by_sum_of_squares_staged(x: jax.Array, n: int) -> jax.Array:
    """The same without ``ensure_compile_time_eval``: ``int()`` meets a tracer."""
    total = int(jnp.sum(jnp.arange(n) ** 2))
    return x * total


@dataclasses.dataclass(frozen=True)
class SeenWhileTracing:
    """What Python held for ``jnp.sum(jnp.arange(n) ** 2)`` while a checkpoint was traced."""

    concrete: bool  #: ``False`` when it was a tracer (a value known only when the program runs)
    shown: str  #: its repr, or the tracer's abstract type


def value_seen_while_tracing(n: int = 4, compile_time_eval: bool = True) -> SeenWhileTracing:
    """Trace a checkpointed function with static ``n`` and report what ``jnp`` gave Python."""
    seen: list[Any] = []

    @partial(jax.checkpoint, static_argnums=(1,))
    def f(x: jax.Array, n: int) -> jax.Array:
        if compile_time_eval:
            with jax.ensure_compile_time_eval():
                total = jnp.sum(jnp.arange(n) ** 2)
        else:
            total = jnp.sum(jnp.arange(n) ** 2)
        seen.append(total)
        return x * total

    jax.make_jaxpr(jax.grad(f), static_argnums=(1,))(1.0, n)
    value = seen[0]
    if isinstance(value, jax.core.Tracer):
        return SeenWhileTracing(False, f"a tracer of type {value.aval.str_short()}")
    return SeenWhileTracing(True, repr(value))
