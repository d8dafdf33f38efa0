"""How-to (``docs/howto/choose-policy.md``, Decision 5): the block's named values kept in host
memory instead of the device's, followed from the trace to the compiled step of this backend.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.export  # an attribute of jax only once imported, on older releases

from examples.howto.choose_policy import KEEP_NAMES, P, init, layer_fn, make_loss
from examples.tools.measure import CompiledStats, compile_for_analysis, compiled_stats, stats_of
from examples.tools.models import Config
from examples.tools.residuals import Residuals, saved_residuals


def offload_policy(names: Sequence[str] = KEEP_NAMES) -> Any:
    """The names policy with its values kept in host memory instead of the device's."""
    return P.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=list(names),
        offload_src="device",
        offload_dst="pinned_host",
    )


@dataclasses.dataclass(frozen=True)
class OffloadCheck:
    """What each stage makes of the offloading policy, on this backend and for others."""

    kept: Residuals  #: what one layer keeps (the memory kind is in each value's type)
    to_host_bytes: int  #: bytes the traced step asks to send to host memory
    placements: dict[str, int]  #: placement annotations in the step lowered for each platform
    host_buffers: int  #: arrays in host memory in the step compiled for this backend
    stats: CompiledStats  #: this backend's compiled step
    on_device: CompiledStats  #: the same names kept in device memory, for comparison


def offload_check(cfg: Config, platforms: Sequence[str] = ("cpu", "cuda")) -> OffloadCheck:
    """Follow :func:`offload_policy` from the trace to the compiled step of this backend."""
    from examples.howto import offload

    params, x = init(cfg)
    one_layer = jax.tree.map(lambda w: w[0], params)
    policy = offload_policy()
    step = jax.value_and_grad(make_loss(cfg, policy))
    transfers = offload.host_transfers(jax.make_jaxpr(step)(params, x))
    # Releases before 0.6 refuse to export the placement custom call unless told to allow it.
    allow = [jax.export.DisabledSafetyCheck.custom_call("annotate_device_placement")]
    export = functools.partial(jax.export.export, jax.jit(step), disabled_checks=allow)
    placements = {
        p: offload.placement_annotations(str(export(platforms=[p])(params, x).mlir_module()))
        for p in platforms
    }
    compiled = compile_for_analysis(jax.jit(step).lower(params, x))
    names = jax.value_and_grad(make_loss(cfg, P.save_only_these_names(*KEEP_NAMES)))
    return OffloadCheck(
        saved_residuals(layer_fn(cfg, policy), x, one_layer).excluding_arguments(),
        transfers.to_host_bytes,
        placements,
        offload.host_buffers(str(compiled.as_text())),
        stats_of(compiled),
        compiled_stats(names, params, x),
    )
