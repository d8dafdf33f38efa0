"""The step of the how-to guide ``howto/sharded-step``: the guide's mesh and layouts, its FSDP
step written two ways, and what the compiled step does on each device.

The transformer of :mod:`examples.tools.models` is trained data-parallel with its weights sharded
FSDP-style over a 2 × 4 mesh of eight devices (``"data"`` × ``"fsdp"``): each device holds a
quarter of every weight and an eighth of the batch, and gathers a layer's full weights just
before it uses them, under ``jax.jit`` by a sharding constraint and under ``shard_map`` by
``jax.lax.all_gather``. :func:`report` reads the compiled program (its memory and cost analyses
and its HLO text), so it runs on eight host devices as well as on eight GPUs. The guide's
comparisons and the command line that writes the tests' data: :mod:`examples.howto.sharding`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from examples.howto.collectives import collectives, hlo_text
from examples.tools.measure import compile_for_analysis, stats_of
from examples.tools.models import Config, block, init_inputs, init_params, scan_loss

#: A layer of the scanned stack: ``(carry, one layer's weights) -> carry``.
Layer = Callable[[jax.Array, dict[str, jax.Array]], jax.Array]
#: The weights (a dict of stacked arrays) and the batch.
Arguments = tuple[dict[str, jax.Array], jax.Array]

#: The mesh of the guide: two data-parallel groups of four devices that share out the weights.
AXES = ("data", "fsdp")
MESH_SHAPE = (2, 4)
DEVICES = math.prod(MESH_SHAPE)
#: The model of the guide: small enough to compile in about a second on host devices.
CONFIG = Config(layers=4, batch=16, seq=128, width=256, heads=4)
#: The name the layer gives to its gathered weights, for names-based policies.
GATHERED = "gathered_weights"

#: Each stacked weight ``(layers, d_in, d_out)`` is split along ``d_in`` over "fsdp" and
#: replicated over "data"; the batch is split over both axes, so each device has 1/8 of it.
WEIGHTS = P(None, "fsdp", None)
BATCH = P(("data", "fsdp"), None, None)

_CP = jax.checkpoint_policies
#: The policies the guide measures, by the name it shows (``None``: no ``jax.checkpoint``).
POLICIES: dict[str, Any] = {
    "no remat": None,
    "nothing_saveable": _CP.nothing_saveable,
    "dots_with_no_batch_dims_saveable": _CP.dots_with_no_batch_dims_saveable,
    "save_only_these_names('mlp_hidden')": _CP.save_only_these_names("mlp_hidden"),
    f"save_only_these_names('{GATHERED}')": _CP.save_only_these_names(GATHERED),
}


def make_mesh(shape: tuple[int, int] = MESH_SHAPE) -> Mesh:
    """A ``("data", "fsdp")`` mesh over the first ``prod(shape)`` devices (Auto axes)."""
    wanted = math.prod(shape)
    devices = jax.devices()
    if len(devices) < wanted:
        raise RuntimeError(
            f"a {shape[0]} × {shape[1]} mesh needs {wanted} devices; this process has "
            f"{len(devices)}. On CPU, run jax.config.update('jax_num_cpu_devices', {wanted}) "
            "right after `import jax` (before any JAX operation), or start Python with "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={wanted}"
        )
    return Mesh(np.array(devices[:wanted]).reshape(shape), AXES)


def place(mesh: Mesh, params: dict[str, jax.Array], x: jax.Array) -> Arguments:
    """Put the weights and the batch on the mesh with :data:`WEIGHTS` and :data:`BATCH`."""
    weights = NamedSharding(mesh, WEIGHTS)
    return (
        {k: jax.device_put(v, weights) for k, v in params.items()},
        jax.device_put(x, NamedSharding(mesh, BATCH)),
    )


# --- the step under jax.jit: sharding by annotation ------------------------------------------


def fsdp_layer(cfg: Config, mesh: Mesh, activation: P | None = BATCH) -> Layer:
    """One transformer layer of the FSDP step: gather the weights, run the block.

    The gather is a sharding constraint to "replicated", so the compiler all-gathers each weight
    over "fsdp"; the gathered weights get a name, so that a policy can keep them. The output (the
    carry every policy keeps for the next layer) is pinned to ``activation`` when one is given.
    """
    replicated = NamedSharding(mesh, P())

    def layer(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
        p = {
            k: checkpoint_name(jax.lax.with_sharding_constraint(w, replicated), GATHERED)
            for k, w in p.items()
        }
        out = block(h, p, cfg.heads)
        if activation is not None:
            out = jax.lax.with_sharding_constraint(out, NamedSharding(mesh, activation))
        return out

    return layer


def jit_step(
    cfg: Config, mesh: Mesh, policy: Any, activation: P | None = BATCH
) -> Callable[..., Any]:
    """``jax.jit(jax.grad(loss))``, the gradients sharded like the weights."""
    layer = fsdp_layer(cfg, mesh, activation)
    if policy is not None:
        layer = jax.checkpoint(layer, policy=policy)
    return jax.jit(jax.grad(scan_loss(layer)), out_shardings=NamedSharding(mesh, WEIGHTS))


# --- the same step under shard_map: every collective written out -------------------------------


def shard_map(*, mesh: Mesh, in_specs: Any, out_specs: Any) -> Callable[[Any], Any]:
    """``jax.shard_map(mesh=..., in_specs=..., out_specs=...)`` as a decorator, on every release.

    Releases before ``jax.shard_map`` (jax 0.5) have it as ``jax.experimental.shard_map``, which
    takes the function first, and whose replication check knows no rule for ``checkpoint_name``
    (it asks for ``check_rep=False``); both are called the same way here.
    """
    specs = {"mesh": mesh, "in_specs": in_specs, "out_specs": out_specs}
    if hasattr(jax, "shard_map"):
        return functools.partial(jax.shard_map, **specs)
    from jax.experimental.shard_map import shard_map as experimental

    return functools.partial(experimental, **specs, check_rep=False)


def shard_map_loss(cfg: Config, mesh: Mesh, policy: Any) -> Callable[..., jax.Array]:
    """The loss as per-device code: each device gathers the weights itself and averages the loss.

    Inside ``jax.shard_map`` a weight block is the device's own quarter, and
    ``jax.lax.all_gather(..., tiled=True)`` over "fsdp" rebuilds the full weight. Its output is
    named, so the same policies apply as under ``jax.jit``.
    """

    def layer(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
        p = {
            k: checkpoint_name(jax.lax.all_gather(w, "fsdp", axis=0, tiled=True), GATHERED)
            for k, w in p.items()
        }
        return block(h, p, cfg.heads)

    if policy is not None:
        layer = jax.checkpoint(layer, policy=policy)

    @shard_map(mesh=mesh, in_specs=(WEIGHTS, BATCH), out_specs=P())
    def loss(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        mean: jax.Array = jax.lax.pmean(scan_loss(layer)(params, x), AXES)
        return mean

    typed: Callable[..., jax.Array] = loss  # the shard_map wrapper is untyped
    return typed


def shard_map_step(cfg: Config, mesh: Mesh, policy: Any) -> Callable[..., Any]:
    return jax.jit(jax.grad(shard_map_loss(cfg, mesh, policy)))


VARIANTS = {"jit": jit_step, "shard_map": shard_map_step}


@dataclasses.dataclass(frozen=True)
class StepReport:
    """What one compiled sharded step does on each device (XLA's analyses are per device)."""

    variant: str
    policy: str
    temp_bytes: int
    argument_bytes: int
    output_bytes: int
    flops: float | None
    gathers_forward: int  #: all-gather operations in the forward pass's code
    gathers_backward: int  #: ... in the backward pass's code: the weights gathered again
    gathered_bytes: int  #: bytes all-gathered per step, every run of every loop counted
    reduced_bytes: int  #: bytes through all-reduce and reduce-scatter per step

    @property
    def weights(self) -> str:
        return "gathered again" if self.gathers_backward else "kept from the forward pass"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def report(step: Callable[..., Any], params: Any, x: Any, variant: str, policy: str) -> StepReport:
    """Compile ``step`` for the placed arguments; read its memory, FLOPs and collectives."""
    compiled = compile_for_analysis(jax.jit(step).lower(params, x))
    stats = stats_of(compiled)
    found = collectives(hlo_text(compiled))
    gathers = [c for c in found if c.op == "all-gather"]
    return StepReport(
        variant=variant,
        policy=policy,
        temp_bytes=stats.temp_bytes,
        argument_bytes=stats.argument_bytes,
        output_bytes=stats.output_bytes,
        flops=stats.flops,
        gathers_forward=sum(not c.backward for c in gathers),
        gathers_backward=sum(c.backward for c in gathers),
        gathered_bytes=sum(c.nbytes * c.runs for c in gathers),
        reduced_bytes=sum(
            c.nbytes * c.runs for c in found if c.op in ("all-reduce", "reduce-scatter")
        ),
    )


def measure(
    mesh: Mesh,
    cfg: Config = CONFIG,
    variant: str = "jit",
    policies: Sequence[str] | None = None,
) -> list[StepReport]:
    """A :class:`StepReport` per policy (all of :data:`POLICIES` by default)."""
    names = list(POLICIES) if policies is None else list(policies)
    unknown = [n for n in names if n not in POLICIES]
    if unknown or variant not in VARIANTS:
        raise KeyError(
            f"unknown policies {unknown} or variant {variant!r}; "
            f"known: {list(POLICIES)}, variants {list(VARIANTS)}"
        )
    params, x = place(mesh, init_params(cfg), init_inputs(cfg))
    return [report(VARIANTS[variant](cfg, mesh, POLICIES[n]), params, x, variant, n) for n in names]
