"""Remat on a sharded training step: the code of the how-to guide ``howto/sharded-step``.

The step itself (the mesh, the layouts, the FSDP step under ``jax.jit`` and under ``shard_map``,
and the report of its compiled program) is :mod:`examples.howto.fsdp_step`. Here: what checkpoint
policies make of it (whether the gathered weights are kept from the forward pass or gathered
again, and how many bytes per device that costs), under each of XLA's partitioners and with the
saved carry pinned to each layout, as the guide's tables; and the gradient, shard by shard.

Run ``python -m examples.howto.sharding --out DIR`` (it asks for eight CPU devices itself) to
write the gradients of every variant and policy, shard by shard, and the measurements, as the
tests do.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P
from numpy.typing import NDArray

from examples.howto import explicit_axes
from examples.howto.fsdp_step import (
    BATCH,
    CONFIG,
    DEVICES,
    GATHERED,
    POLICIES,
    VARIANTS,
    Arguments,
    Layer,
    StepReport,
    jit_step,
    make_mesh,
    measure,
    place,
    report,
)
from examples.tools.display import Table, format_bytes
from examples.tools.jaxprs import config_value
from examples.tools.measure import compiled_stats
from examples.tools.models import Config, block, init_inputs, init_params, scan_loss


def one_device_bytes(arrays: Any, device: Any) -> int:
    """Bytes of the shards that ``device`` holds, over every array of a pytree."""
    return sum(
        s.data.nbytes
        for a in jax.tree.leaves(arrays)
        for s in a.addressable_shards
        if s.device == device
    )


def shard_table(arrays: dict[str, jax.Array]) -> Table:
    """Each array's global shape, its spec, and the shape of the block one device holds."""
    rows = [
        (
            f"`{name}`",
            f"{tuple(a.shape)}",
            f"`{a.sharding.spec}`",  # type: ignore[attr-defined]  # a NamedSharding's spec
            f"{tuple(a.addressable_shards[0].data.shape)}",
            format_bytes(a.addressable_shards[0].data.nbytes),
        )
        for name, a in arrays.items()
    ]
    header = ("array", "global shape", "partition spec", "per device", "bytes per device")
    return Table(header, rows, align=["left", "right", "left", "right", "right"])


#: XLA's two SPMD partitioners, by the value of ``jax_use_shardy_partitioner`` that selects them.
PARTITIONERS = {"Shardy": True, "GSPMD": False}
#: The policies compared under both partitioners: the gather recomputed, or kept by its name.
KEEP_OR_REGATHER = ("nothing_saveable", f"save_only_these_names('{GATHERED}')")


def default_partitioner() -> str:
    """The partitioner this JAX uses unless told otherwise (Shardy from jax 0.7, GSPMD before)."""
    return "Shardy" if jax.config.jax_use_shardy_partitioner else "GSPMD"


@contextlib.contextmanager
def partitioner(name: str) -> Iterator[None]:
    """Compile under XLA's ``name`` partitioner (a key of :data:`PARTITIONERS`), then restore."""
    with config_value("jax_use_shardy_partitioner", PARTITIONERS[name]):
        yield


def by_partitioner(
    mesh: Mesh, cfg: Config = CONFIG, policies: Sequence[str] = KEEP_OR_REGATHER
) -> list[StepReport]:
    """The compared policies under each partitioner, for each way of writing the gather: the jit
    step's constraint, ``shard_map``'s ``all_gather``, and ``reshard`` on ``Explicit`` axes where
    this JAX has them. Each report's ``variant`` reads ``"<way>, <partitioner>"``."""
    out: list[StepReport] = []
    for name in PARTITIONERS:
        with partitioner(name):
            for variant in VARIANTS:
                for r in measure(mesh, cfg, variant, policies):
                    out.append(dataclasses.replace(r, variant=f"{variant}, {name}"))
            if explicit_axes.has_explicit_axes():
                for r in explicit_axes.measure(cfg, policies):
                    out.append(dataclasses.replace(r, variant=f"Explicit axes, {name}"))
    return out


def partitioner_table(reports: Sequence[StepReport]) -> Table:
    rows = [
        (
            r.variant.split(", ")[0].replace("jit", "jit + constraint"),
            r.variant.split(", ")[1],
            f"`{r.policy}`",
            format_bytes(r.temp_bytes),
            f"{r.gathers_forward} / {r.gathers_backward}",
            format_bytes(r.gathered_bytes),
            r.weights,
        )
        for r in reports
    ]
    header = (
        "gather written as",
        "partitioner",
        "policy",
        "temp memory per device",
        "all-gathers fwd / bwd",
        "gathered per step",
        "gathered weights",
    )
    return Table(header, rows, align=["left", "left", "left", "right", "right", "right", "left"])


def measure_activation(
    mesh: Mesh, specs: dict[str, P | None], cfg: Config = CONFIG, policy: str = "nothing_saveable"
) -> list[StepReport]:
    """The jit step under one policy with the layer's output pinned to each of ``specs``."""
    params, x = place(mesh, init_params(cfg), init_inputs(cfg))
    return [
        report(jit_step(cfg, mesh, POLICIES[policy], spec), params, x, "jit", label)
        for label, spec in specs.items()
    ]


def kept_cost(reports: Sequence[StepReport], baseline: str = "nothing_saveable") -> dict[str, int]:
    """Temporary bytes per device of each policy beyond ``baseline``'s."""
    base = next(r.temp_bytes for r in reports if r.policy == baseline)
    return {r.policy: r.temp_bytes - base for r in reports}


def _signed_bytes(n: int) -> str:
    return format_bytes(n) if n >= 0 else "−" + format_bytes(-n)


def policy_table(reports: Sequence[StepReport], baseline: str = "nothing_saveable") -> Table:
    extra = kept_cost(reports, baseline)
    rows = [
        (
            f"`{r.policy}`",
            format_bytes(r.temp_bytes),
            _signed_bytes(extra[r.policy]),
            "n/a" if r.flops is None else f"{r.flops / 1e9:.2f}",
            f"{r.gathers_forward} / {r.gathers_backward}",
            format_bytes(r.gathered_bytes),
            r.weights,
        )
        for r in reports
    ]
    header = (
        "policy",
        "temp memory per device",
        f"beyond `{baseline}`",
        "GFLOP per device (loop body once)",
        "all-gathers fwd / bwd",
        "gathered per step",
        "gathered weights",
    )
    return Table(header, rows, align=["left", "right", "right", "right", "right", "right", "left"])


def activation_table(reports: Sequence[StepReport]) -> Table:
    rows = [
        (
            r.policy,
            format_bytes(r.temp_bytes),
            "n/a" if r.flops is None else f"{r.flops / 1e9:.2f}",
            f"{r.gathers_forward} / {r.gathers_backward}",
            format_bytes(r.gathered_bytes),
        )
        for r in reports
    ]
    header = ["layer output pinned to", "temp memory per device", "GFLOP (loop body once)"]
    header += ["all-gathers fwd / bwd", "gathered per step"]
    return Table(header, rows)


# --- the gradient, shard by shard ---------------------------------------------------------------


def gradient_shards(
    grads: dict[str, jax.Array],
) -> dict[str, list[tuple[int, tuple[int, ...], NDArray[Any]]]]:
    """``{weight: [(device id, where the shard starts in the global array, its values), ...]}``."""
    return {
        name: [
            (s.device.id, tuple(i.start or 0 for i in s.index), np.asarray(s.data))
            for s in g.addressable_shards
        ]
        for name, g in grads.items()
    }


#: The layouts the guide pins the saved carry to.
ACTIVATION_SPECS: dict[str, P | None] = {
    "nothing (the compiler's choice)": None,
    "P(('data', 'fsdp'), None, None): batch over all 8": BATCH,
    "P('data', None, None): batch over 2, whole on each fsdp device": P("data", None, None),
}
#: The smaller model whose gradients ``python -m examples.howto.sharding`` writes for the tests
#: (batch and widths still divide by the mesh's axes).
CHECK_CONFIG = Config(layers=2, batch=8, seq=32, width=64, heads=4)


def plain_layer(cfg: Config, policy: Any) -> Layer:
    """The block with no sharding anywhere, checkpointed with ``policy`` (``None``: not at all)."""
    layer = lambda h, p: block(h, p, cfg.heads)
    return layer if policy is None else jax.checkpoint(layer, policy=policy)


def single_device(cfg: Config = CONFIG) -> Arguments:
    """The weights and the batch whole on the first device, as a one-device step gets them."""
    placed: Arguments = jax.device_put((init_params(cfg), init_inputs(cfg)), jax.devices()[0])
    return placed


def single_device_stats(cfg: Config = CONFIG) -> dict[str, Any]:
    """:func:`~examples.tools.measure.compiled_stats` of the unsharded step, per policy."""
    args = single_device(cfg)
    return {
        name: compiled_stats(jax.grad(scan_loss(plain_layer(cfg, policy))), *args)
        for name, policy in POLICIES.items()
    }


def max_difference(grads: dict[str, jax.Array], reference: dict[str, Any]) -> float:
    """The largest absolute difference between two gradients, over every weight."""
    return max(
        float(np.max(np.abs(np.asarray(grads[k]) - np.asarray(reference[k])))) for k in reference
    )


def write_check(out: Path, cfg: Config = CONFIG, check: Config = CHECK_CONFIG) -> None:
    """Write ``gradients.npz`` (every shard of every variant and policy, on the model ``check``)
    and ``report.json`` (the measurements of the guide, on the model ``cfg``)."""
    mesh = make_mesh()
    params, x = place(mesh, init_params(check), init_inputs(check))
    arrays: dict[str, np.ndarray] = {}
    for variant, make_step in VARIANTS.items():
        for p, policy in enumerate(POLICIES.values()):
            grads = make_step(check, mesh, policy)(params, x)
            for weight, shards in gradient_shards(grads).items():
                for device, start, values in shards:
                    key = f"{variant}/{p}/{weight}/{device}"
                    arrays[key] = values
                    arrays[key + "/start"] = np.array(start, dtype=np.int64)
    # numpy's stub types **kwds as if one could be its allow_pickle: bool.
    np.savez(out / "gradients.npz", **arrays)  # type: ignore[arg-type]
    placed = place(mesh, init_params(cfg), init_inputs(cfg))
    data = {
        "devices": jax.device_count(),
        "config": dataclasses.asdict(cfg),
        "check_config": dataclasses.asdict(check),
        "policies": list(POLICIES),
        "argument_bytes_device0": one_device_bytes(placed, jax.devices()[0]),
        "steps": [r.as_dict() for v in VARIANTS for r in measure(mesh, cfg, v)],
        "activation": [r.as_dict() for r in measure_activation(mesh, ACTIVATION_SPECS, cfg)],
        "single_device": {k: s.as_dict() for k, s in single_device_stats(cfg).items()},
        "default_partitioner": default_partitioner(),
        "partitioners": [r.as_dict() for r in by_partitioner(mesh, cfg)],
    }
    (out / "report.json").write_text(json.dumps(data, indent=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.howto.sharding",
        description="Gradients and measurements of the sharded step on eight devices.",
    )
    parser.add_argument("--out", type=Path, required=True, help="an empty or new folder")
    ns = parser.parse_args(argv)
    if ns.out.exists() and any(ns.out.iterdir()):
        print(f"{ns.out} is not empty; not overwriting it", file=sys.stderr)
        return 2
    # Eight host devices, unless the backend already started (with XLA_FLAGS, say).
    with contextlib.suppress(RuntimeError):
        jax.config.update("jax_num_cpu_devices", DEVICES)
    ns.out.mkdir(parents=True, exist_ok=True)
    write_check(ns.out)
    print(f"wrote {ns.out / 'gradients.npz'} and {ns.out / 'report.json'}")
    return 0


if __name__ == "__main__":
    explicit_axes.leave(main())
