"""The FLOPs of a step, counted two ways: the compiler's and the program's.

- :func:`compiled_costs`: FLOPs and bytes accessed from a compiled executable's
  ``cost_analysis()``, or where the compiler reports none (XLA's GPU compiler, for compile-only
  devices) the compiled HLO module costed by XLA's CPU cost model. Either counts the body of a
  ``while`` loop (a scan over layers) once, however many times it runs.
- :func:`step_flops`: the matrix-multiply FLOPs of the step's jaxpr, a scan's body counted once
  per iteration and a ``jax.checkpoint`` policy's recomputation included: the same count for
  every target, before any compiler (XLA's own rematerialization is not in it).

Used by :mod:`examples.tools.plans` and the page "Will it fit?".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from examples.tools import compat


def compiled_costs(compiled: Any) -> tuple[float | None, float | None, str | None]:
    """FLOPs and bytes accessed: the compiler's own ``cost_analysis()``, or where it reports none
    (XLA's GPU compiler, for compile-only devices) the compiled HLO module costed by XLA's
    ``HloCostAnalysis`` through the CPU client (a private call of jaxlib; None if it is gone)."""
    cost = compat.cost_analysis(compiled)
    source = "compiled"
    if not cost or "flops" not in cost:
        try:
            _jax = importlib.import_module("jax._src.lib")._jax
            (module,) = compiled.runtime_executable().hlo_modules()
            client = jax.devices("cpu")[0].client
            cost = _jax.hlo_module_cost_analysis(client, module)
            source = "compiled HLO, XLA's CPU cost analysis"
        except Exception:  # a private API: absent or changed on some jaxlib
            return None, None, None
    accessed = cost.get("bytes accessed")
    return float(cost["flops"]), None if accessed is None else float(accessed), source


def _jaxprs_in(value: Any) -> list[Any]:
    """The jaxprs an equation's parameter holds (a Jaxpr, a ClosedJaxpr, or a tuple of them)."""
    if isinstance(value, (tuple, list)):
        return [j for v in value for j in _jaxprs_in(v)]
    if hasattr(value, "eqns"):  # a Jaxpr
        return [value]
    if hasattr(value, "jaxpr") and hasattr(value, "consts"):  # a ClosedJaxpr
        return [value.jaxpr]
    return []


def _dot_flops(eqn: Any) -> float:
    lhs, rhs = (v.aval.shape for v in eqn.invars[:2])
    (_lhs_contract, _), (_lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
    rhs_free = [d for i, d in enumerate(rhs) if i not in (*rhs_batch, *_rhs_contract(eqn))]
    return 2.0 * float(np.prod(lhs, dtype=np.float64)) * float(np.prod(rhs_free, dtype=np.float64))


def _rhs_contract(eqn: Any) -> tuple[int, ...]:
    return tuple(eqn.params["dimension_numbers"][0][1])


def _count(jaxpr: Any) -> float:
    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "dot_general":
            total += _dot_flops(eqn)
            continue
        if name == "cond":  # one branch runs: count the dearest
            total += max((_count(j) for j in _jaxprs_in(eqn.params["branches"])), default=0.0)
            continue
        inner = sum(_count(j) for v in eqn.params.values() for j in _jaxprs_in(v))
        if name == "scan":
            inner *= eqn.params["length"]
        elif name == "while":
            raise ValueError(
                "a while loop's trip count is not known when tracing; step_flops counts "
                "scans (jax.lax.scan, fori_loop with static bounds) only"
            )
        total += inner
    return total


def step_flops(fn: Callable[..., Any], *args: Any) -> float:
    """The matrix-multiply FLOPs of one call of ``fn``, counted in its jaxpr: ``2 * m * n * k``
    for every ``dot_general``, a scan's body once per iteration, the recomputation a
    ``jax.checkpoint`` policy asks for included. This is the work the program asks of any
    compiler, the same for every target; XLA's own rematerialization (which happens later) is
    not in it, and elementwise work is left out. ``args`` may be shapes
    (:class:`jax.ShapeDtypeStruct`); nothing is compiled or run."""
    closed = jax.make_jaxpr(fn)(*args)
    return _count(closed.jaxpr)
