"""The reader's own model: the explorer's measurements on any function that returns a loss."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.explorer.data import Result
from examples.explorer.model import NO_REMAT, POLICIES
from examples.explorer.render import FLOPS, FLOPS_WITHOUT_PRODUCTS, plot_tradeoff, results_table
from examples.tools.display import Table
from examples.tools.measure import MIN_REPEATS, compiled_stats, time_interleaved
from examples.tools.residuals import saved_residuals

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What ``compare_policies`` returns: a table in a notebook or in ``str``.

    ``rows`` holds the same figures as plain dicts (bytes, FLOPs, seconds), one per policy, in
    the order measured; ``plot()`` draws memory against step time.
    """

    results: list[Result]
    backend: str
    #: Column heading for the residual bytes: the function is not a layer.
    KEPT = "kept for the backward pass"

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [dataclasses.asdict(r) for r in self.results]

    def table(self) -> Table:
        # XLA:GPU's FLOP count leaves out the products it hands to cuBLAS (jax-ml/jax#22249).
        flops = FLOPS_WITHOUT_PRODUCTS if self.backend == "gpu" else FLOPS
        return results_table(self.results, kept=self.KEPT, flops=flops)

    def __str__(self) -> str:
        return self.table().to_markdown()

    def _repr_markdown_(self) -> str:
        return self.table().to_markdown()

    def plot(self, title: str = "your function") -> Figure:
        return plot_tradeoff([(title, self.results)])


def compare_policies(
    fn: Callable[..., Any],
    *args: Any,
    policies: dict[str, Any] | Sequence[str] | None = None,
    repeats: int = MIN_REPEATS,
) -> Comparison:
    """Measure ``jax.grad(jax.checkpoint(fn, policy=...))`` for several policies.

    ``fn`` must return a real scalar and take at least one floating-point array; gradients are
    taken with respect to all of its arguments. ``policies`` is a dict of name -> policy, a list
    of names from :data:`POLICIES`, or ``None`` for a default set. Each row gives the bytes JAX
    keeps for the backward pass, XLA's temporary memory and FLOPs, and the step time (median,
    fastest and slowest of ``repeats`` timed calls).

    By default the whole of ``fn`` is wrapped in ``jax.checkpoint``. If ``fn`` takes a keyword
    argument ``policy``, it is called with each policy instead (``None`` meaning: no
    ``jax.checkpoint``), so that it can apply the policy where it belongs, e.g. to a scan body.

    Returns a :class:`Comparison`: a table in a notebook, ``.rows`` as plain numbers and
    ``.plot()`` for memory against time. Raises ``TypeError`` if no argument is a floating-point
    array or the output is not floating point, ``ValueError`` if the output is not a scalar or
    ``jax.grad`` cannot differentiate ``fn``, before anything is measured.
    """
    name = getattr(fn, "__name__", repr(fn))
    leaves = jax.tree_util.tree_leaves(args)
    if not any(
        isinstance(leaf, (jax.Array, np.ndarray)) and jnp.issubdtype(leaf.dtype, jnp.floating)
        for leaf in leaves
    ):
        raise TypeError(
            f"compare_policies needs at least one floating-point array among the arguments of "
            f"{name!r} to differentiate with respect to; it was given "
            f"{[type(a).__name__ for a in args] or 'no arguments'}"
        )
    try:
        takes_policy = "policy" in inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins and some callables have no signature
        takes_policy = False
    plain = functools.partial(fn, policy=None) if takes_policy else fn
    try:
        out = jax.eval_shape(plain, *args)
    except Exception as err:
        raise ValueError(f"calling {name!r} with these arguments failed: {err}") from err
    if not isinstance(out, jax.ShapeDtypeStruct) or out.shape != ():
        raise ValueError(
            f"compare_policies needs a function that returns a scalar (a loss); {name!r} "
            f"returns {out}"
        )
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(
            f"{name!r} returns {out.dtype}, which cannot be differentiated: return a "
            "floating-point scalar"
        )
    argnums = tuple(range(len(args)))
    try:
        jax.eval_shape(jax.grad(plain, argnums=argnums, allow_int=True), *args)
    except Exception as err:
        raise ValueError(f"jax.grad cannot differentiate {name!r}: {err}") from err

    if policies is None:
        policies = [
            NO_REMAT,
            "dots_saveable",
            "dots_with_no_batch_dims_saveable",
            "nothing_saveable",
        ]
    if not isinstance(policies, dict):
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise KeyError(f"unknown policies {unknown}; known: {list(POLICIES)}")
        policies = {p: POLICIES[p] for p in policies}
    grads: dict[str, Callable[..., Any]] = {}
    checkpointed: dict[str, Callable[..., Any]] = {}
    for label, policy in policies.items():
        f: Callable[..., Any]
        if takes_policy:
            f = functools.partial(fn, policy=policy)
        else:
            f = fn if policy is None else jax.checkpoint(fn, policy=policy)
        checkpointed[label] = f
        grads[label] = jax.grad(f, argnums=argnums, allow_int=True)
    stats = {label: compiled_stats(grad, *args, runs=True) for label, grad in grads.items()}
    # Timed in rounds that call every variant once, so a slow spell falls on all of them.
    timings = time_interleaved(
        {label: jax.jit(grad) for label, grad in grads.items()}, *args, repeats=repeats
    )
    results = [
        Result.with_timing(
            timings[label],
            policy=label,
            residual_bytes_per_layer=saved_residuals(f, *args).excluding_arguments().nbytes,
            temp_bytes=stats[label].temp_bytes,
            argument_bytes=stats[label].argument_bytes,
            host_temp_bytes=stats[label].host_temp_bytes,
            flops=stats[label].flops,
        )
        for label, f in checkpointed.items()
    ]
    return Comparison(results, jax.default_backend())
