"""How-to (``docs/howto/remat-nnx.md``): what the forward loop over layers of an NNX training step
returns per layer, read off the traced step, and how much of it is the stacked parameters.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

from examples.howto.flax_steps import make_batch
from examples.howto.nnx_training import abstract, pure_step
from examples.tools.display import Table, format_bytes
from examples.tools.jaxprs import walk


@dataclasses.dataclass(frozen=True)
class ScanOutputs:
    """What the forward loop over layers returns per layer, stacked (JAX's short types)."""

    outputs: list[str]  #: every stacked output of the forward scan
    output_bytes: int  #: their size
    parameters: list[str]  #: those with the shape and dtype of a stacked parameter
    parameter_bytes: int  #: their size


def scan_outputs(make_model: Callable[[], Any]) -> ScanOutputs:
    """Read the forward scan over layers off the traced training step.

    The first ``scan`` equation of the trace is the forward loop; its outputs after the carry
    are what the layers return, stacked. Those with the shape and dtype of one of the stacked
    blocks' parameters are the parameters, returned again.
    """
    model, optimizer = abstract(make_model)
    blocks = nnx.state(getattr(model, "blocks"), nnx.Param)  # noqa: B009 (any model with blocks)
    stacked = {(p.shape, p.dtype) for p in jax.tree.leaves(blocks)}
    state, f = pure_step(model, optimizer)
    jaxpr = jax.make_jaxpr(f)(state, make_batch())
    forward = next(e for e, _ in walk(jaxpr.jaxpr) if e.primitive.name == "scan")
    avals = [v.aval for v in forward.outvars[_num_carry(forward) :]]
    params = [a for a in avals if (a.shape, a.dtype) in stacked]
    return ScanOutputs(
        outputs=[a.str_short(short_dtypes=True) for a in avals],
        output_bytes=sum(_nbytes(a) for a in avals),
        parameters=[a.str_short(short_dtypes=True) for a in params],
        parameter_bytes=sum(_nbytes(a) for a in params),
    )


def _num_carry(scan: Any) -> int:
    """How many of a ``scan`` equation's outputs are the carry (the rest are stacked outputs).

    Up to jax 0.11 the equation says so in its ``num_carry`` parameter; jax 0.12 replaced it
    with ``ft_out``, a flat tree of (carry, stacked outputs) over the same outputs.
    """
    if "num_carry" in scan.params:
        return int(scan.params["num_carry"])
    carry, _ = scan.params["ft_out"].unpack()
    return len(list(carry))


def _nbytes(aval: Any) -> int:
    """Bytes of an array of this type (a typed random key's dtype has an item size too)."""
    return int(math.prod(aval.shape) * aval.dtype.itemsize)


def outputs_table(rows: dict[str, ScanOutputs], listed: int = 10) -> Table:
    """Per model: what its forward scan returns (listed if at most ``listed`` arrays), and how
    much of it is parameters."""

    def shown(r: ScanOutputs) -> str:
        if len(r.outputs) <= listed:
            return " ".join(f"`{o}`" for o in r.outputs)
        return f"{len(r.outputs)} arrays (not listed)"

    return Table(
        ["model", "stacked outputs of the forward scan", "bytes", "of which parameters"],
        [
            (f"`{n}`", shown(r), format_bytes(r.output_bytes), format_bytes(r.parameter_bytes))
            for n, r in rows.items()
        ],
        align=["left", "left", "right", "right"],
    )
