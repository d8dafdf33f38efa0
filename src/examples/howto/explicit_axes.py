"""The sharded step of :mod:`examples.howto.fsdp_step` on a mesh with ``Explicit`` axes, the kind
``jax.make_mesh`` gives by default on newer JAX releases.

There ``jax.lax.with_sharding_constraint`` is refused; the gather is written with
``jax.sharding.reshard(w, P())``, named with ``checkpoint_name`` as on the ``Auto`` mesh, and the
policies are compared on both. ``python -m examples.howto.explicit_axes`` prints the comparison as
JSON; run it with eight devices (``XLA_FLAGS=--xla_force_host_platform_device_count=8``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import jax
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from examples.howto import fsdp_step as s
from examples.tools.models import Config, block, init_inputs, init_params, scan_loss

#: The policies compared on both kinds of mesh: the gather recomputed, or kept by its name.
COMPARED = ("nothing_saveable", f"save_only_these_names('{s.GATHERED}')")


def has_explicit_axes() -> bool:
    """Whether this JAX has ``Explicit`` mesh axes and ``jax.sharding.reshard``."""
    return hasattr(jax.sharding, "AxisType") and hasattr(jax.sharding, "reshard")


def explicit_mesh(shape: tuple[int, int] = s.MESH_SHAPE) -> Mesh:
    """The guide's ``("data", "fsdp")`` mesh with ``Explicit`` axes."""
    explicit = jax.sharding.AxisType.Explicit
    mesh: Mesh = jax.make_mesh(shape, s.AXES, axis_types=(explicit, explicit))
    return mesh


@contextlib.contextmanager
def mesh_context(mesh: Mesh) -> Iterator[None]:
    """The mesh as the context of tracing (``jax.set_mesh``, ``jax.sharding.use_mesh`` before)."""
    setter = getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh")  # noqa: B009
    with setter(mesh):
        yield


def explicit_layer(cfg: Config) -> Callable[[jax.Array, dict[str, jax.Array]], jax.Array]:
    """One layer of the FSDP step on an ``Explicit`` mesh: ``reshard`` gathers each weight (the
    constraint of the ``Auto`` version is refused there), and the gathered weight is named."""

    def layer(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
        gathered = {
            k: checkpoint_name(jax.sharding.reshard(w, P()), s.GATHERED) for k, w in p.items()
        }
        return block(h, gathered, cfg.heads)

    return layer


def explicit_step(cfg: Config, policy: Any) -> Callable[..., Any]:
    """``jax.jit(jax.grad(loss))`` of the scanned, checkpointed explicit layer."""
    return jax.jit(jax.grad(scan_loss(jax.checkpoint(explicit_layer(cfg), policy=policy))))


def measure(cfg: Config = s.CONFIG, policies: Sequence[str] = COMPARED) -> list[s.StepReport]:
    """A report per policy on the ``Explicit`` mesh (memory, FLOPs, gathers), read as
    :func:`examples.howto.fsdp_step.report` reads the ``Auto`` one's."""
    mesh = explicit_mesh()
    params = {
        k: jax.device_put(v, NamedSharding(mesh, s.WEIGHTS)) for k, v in init_params(cfg).items()
    }
    x = jax.device_put(init_inputs(cfg), NamedSharding(mesh, s.BATCH))
    with mesh_context(mesh):
        return [
            s.report(explicit_step(cfg, s.POLICIES[name]), params, x, "explicit", name)
            for name in policies
        ]


def compare(cfg: Config = s.CONFIG) -> dict[str, list[dict[str, Any]]]:
    """The compared policies on both meshes: ``{"auto": [...], "explicit": [...]}``."""
    auto = s.measure(s.make_mesh(), cfg, policies=list(COMPARED))
    return {
        "auto": [dataclasses.asdict(r) for r in auto],
        "explicit": [dataclasses.asdict(r) for r in measure(cfg)],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Print :func:`compare` as JSON (needs eight devices)."""
    del argv
    json.dump(compare(), sys.stdout)
    return 0


def leave(code: int) -> NoReturn:
    """Exit an eight-device child with ``code`` once its output is flushed, skipping the
    interpreter's teardown: there, XLA's CPU client with eight host devices once ended a child
    with signal 11 after it had written its whole result (seen once in a full test run, on jax
    0.12.0.1), which failed a test whose result was complete."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    leave(main())
