"""Where a policy's offloaded residuals end up: the jaxpr, the compiled program, XLA's memory.

The offload policies (``save_and_offload_only_these_names``, ``offload_dot_with_no_batch_dims``,
or a custom policy answering ``Offloadable``) ask for residuals to be moved to another memory
kind. Whether the backend really moves them shows only further down the compilation; this
module follows them on the reference page's model (:func:`examples.reference.policies.model`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from examples.reference.policies import BY_NAME, model, model_inputs
from examples.tools import compat
from examples.tools.display import Table, format_bytes
from examples.tools.jaxprs import walk
from examples.tools.measure import compiled_stats


def memory_kinds() -> list[str]:
    """The memory kinds the first device can address (``device``, ``pinned_host``, ...)."""
    return [m.kind for m in jax.devices()[0].addressable_memories()]


#: How XLA's compiled HLO marks a buffer in pinned host memory: memory space 5 in a layout
#: (``f32[8,128,256]{2,1,0:S(5)}``) on GPU and TPU, or a ``memory_kind`` attribute. A bare
#: "pinned_host" is not enough: the HLO's metadata also holds Python function names.
_HOST_SPACE = re.compile(r'\bS\(5\)|memory_kind\s*=\s*"pinned_host"')


@dataclasses.dataclass(frozen=True)
class OffloadEvidence:
    """Where a policy's offloaded residuals end up, read off three stages of compilation."""

    backend: str
    #: ``device_put`` equations to the host memory space in the jaxpr of ``jax.grad``.
    jaxpr_host_transfers: int
    #: Whether XLA's compiled program still places buffers in host memory.
    compiled_uses_host_memory: bool
    #: XLA's memory analysis: bytes of temporaries in host memory (``None`` if not reported).
    host_temp_bytes: int | None
    #: Largest absolute difference from the gradient of the model without ``jax.checkpoint``.
    grad_max_abs_diff: float
    #: Largest absolute entry of that gradient, to judge the difference against.
    grad_scale: float
    #: The first few lines of the compiled program that mention host memory (for diagnosis).
    host_memory_lines: tuple[str, ...] = ()


def host_transfers(jaxpr: Any) -> int:
    """How many values ``device_put`` equations in ``jaxpr`` (and the jaxprs inside it) move to
    the host: read from the abstract values where the release records a memory space there, from
    the ``device_put``'s destination otherwise (:mod:`examples.tools.compat`)."""
    count = 0
    for eqn, _ in walk(jaxpr):
        if eqn.primitive.name == "device_put":
            on_host = sum(compat.aval_on_host(v.aval) for v in eqn.outvars)
            count += on_host or int(compat.device_put_to_host(eqn))
    return count


def offload_evidence(policy: Callable[..., Any], *args: jax.Array) -> OffloadEvidence:
    """Follow ``jax.grad(jax.checkpoint(model, policy))`` from jaxpr to compiled program."""
    args = args or model_inputs()
    grad = jax.grad(jax.checkpoint(model, policy=policy), argnums=(0, 1))
    compiled = jax.jit(grad).lower(*args).compile().as_text()
    if compiled is None:  # the backend gives no text for compiled programs
        raise RuntimeError(f"the {jax.default_backend()} backend gives no compiled program text")
    host_lines = [line.strip()[:200] for line in compiled.splitlines() if _HOST_SPACE.search(line)]
    stats = compiled_stats(grad, *args)
    got = jax.jit(grad)(*args)
    expected = jax.grad(model, argnums=(0, 1))(*args)
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(got, expected, strict=True))
    return OffloadEvidence(
        backend=jax.default_backend(),
        jaxpr_host_transfers=host_transfers(jax.make_jaxpr(grad)(*args).jaxpr),
        compiled_uses_host_memory=bool(host_lines),
        host_temp_bytes=stats.host_temp_bytes,
        grad_max_abs_diff=diff,
        grad_scale=max(float(jnp.max(jnp.abs(g))) for g in expected),
        host_memory_lines=tuple(host_lines[:5]),
    )


def offload_table(names: Sequence[str], *args: jax.Array) -> Table:
    """:func:`offload_evidence` for catalogue entries
    (:data:`examples.reference.policies.BY_NAME`)."""
    rows = []
    for name in names:
        ev = offload_evidence(BY_NAME[name].build(), *args)
        rows.append(
            [
                f"`{name}`",
                ev.jaxpr_host_transfers,
                "yes" if ev.compiled_uses_host_memory else "no",
                "not reported" if ev.host_temp_bytes is None else format_bytes(ev.host_temp_bytes),
                f"{ev.grad_max_abs_diff:.1e} ({ev.grad_scale:.1e})",
            ]
        )
    header = [
        "policy",
        "host transfers in jaxpr",
        "host memory in compiled code",
        "host temp bytes",
        "gradient difference (largest entry)",
    ]
    return Table(header, rows, align=["left", "right", "left", "right", "left"])


def names_to_host(*names: str) -> Callable[..., Any]:
    """A custom policy using JAX's three answers instead of a bool.

    Values named in ``names`` go to pinned host memory (``Offloadable``), other matrix products
    without batch dimensions stay on the device (``Saveable``), and the rest is recomputed
    (``Recompute``).
    """
    from jax.ad_checkpoint import Offloadable, Recompute, Saveable

    def policy(prim: Any, *avals: Any, **params: Any) -> Any:
        if prim.name == "name" and params.get("name") in names:
            return Offloadable(src="device", dst="pinned_host")
        if prim.name == "dot_general":
            (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
            if not lhs_batch and not rhs_batch:
                return Saveable
        return Recompute

    return policy
