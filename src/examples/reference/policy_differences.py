"""What the policies of the installed JAX do where releases differ, detected on it for the policy
reference (``docs/reference/policies.md``): whether ``save_from_both_policies`` hands back its
other policy, whether a named value is listed beside its unnamed input, and what the dots
policies answer for the cuDNN scaled matrix product. The model and catalogue are
:mod:`examples.reference.policies`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from examples.reference.policies import residuals

P = jax.checkpoint_policies


def combination_short_circuits() -> bool:
    """Does ``save_from_both_policies(nothing_saveable, other)`` return ``other`` itself? Newer
    releases do; older ones always build a function that raises unless both answer a bool."""
    other = P.offload_dot_with_no_batch_dims("device", "pinned_host")
    return P.save_from_both_policies(P.nothing_saveable, other) is other


def alias_listed_with_its_input(name: str = "hidden") -> bool:
    """Does the listing without a checkpoint show the value named ``name`` *and* its unnamed input
    (the ``tanh`` output, listed where the release's derivative of ``tanh`` reads it)? Both
    entries are one buffer: ``checkpoint_name`` is an identity."""
    listing = residuals(None).excluding_arguments()
    return name in [r.name for r in listing] and "tanh" in [r.primitive for r in listing]


class _StandIn:
    """A stand-in primitive: the dots policies read only a primitive's name and operand shapes."""

    def __init__(self, name: str) -> None:
        self.name = name


def scaled_matmul_kept() -> dict[str, Any]:
    """What the dots policies answer for ``scaled_matmul_wrapper``, the cuDNN scaled (FP8, MXFP8)
    matrix product, whose operands' leading dimension is the batch: a stand-in with that name,
    asked with a leading dimension of 1 and of 2. The offload policy's answer is the class name
    of what it returns (``RecomputeType``: recomputed)."""
    stand_in = _StandIn("scaled_matmul_wrapper")
    one, two = (jax.ShapeDtypeStruct((n, 4, 4), jnp.float32) for n in (1, 2))
    offload = P.offload_dot_with_no_batch_dims("device", "pinned_host")
    return {
        "dots_saveable": bool(P.dots_saveable(stand_in, one, one)),
        "no_batch_dims, batch 1": bool(P.dots_with_no_batch_dims_saveable(stand_in, one, one)),
        "no_batch_dims, batch 2": bool(P.dots_with_no_batch_dims_saveable(stand_in, two, two)),
        "offload, batch 1": type(offload(stand_in, one, one)).__name__,
    }


def scaled_matmul_sentence(kept: dict[str, Any]) -> str:
    """The page's sentence on :func:`scaled_matmul_kept`."""
    if not kept["dots_saveable"]:
        return (
            "This JAX's `dots_saveable` does not keep `scaled_matmul_wrapper`, the cuDNN scaled "
            "(FP8, MXFP8) matrix product of GPUs: under it that product is recomputed"
        )
    batch_one = kept["no_batch_dims, batch 1"] and not kept["no_batch_dims, batch 2"]
    return (
        "On this JAX, `dots_saveable` also keeps the output of `scaled_matmul_wrapper`, the cuDNN "
        "scaled (FP8, MXFP8) matrix product of GPUs, found by its primitive's name"
        + (
            "; `dots_with_no_batch_dims_saveable` keeps it only when its operands' leading "
            "(batch) dimension is 1"
            if batch_one
            else ""
        )
        + (
            ", and `offload_dot_with_no_batch_dims` never offloads it"
            if kept["offload, batch 1"] != "Offloadable"
            else ""
        )
    )
