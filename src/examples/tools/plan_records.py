"""Plans kept as JSON records, and the small reference step whose record ``nox -s plans`` checks.

The accelerator compilers are not installed where the site is built (see
:mod:`examples.tools.targets` for why), so ``nox -s plans`` compiles on the targets and writes
records under ``src/examples/data/plans/`` that pages render with :func:`load`. A record (schema
``jax-remat-guide/plans/1``) holds the plans (:meth:`examples.tools.plans.Plan.as_dict`) and a
``runinfo`` naming the machine, the jax and jaxlib releases, the installed compilers (libtpu, the
CUDA plugin) and the GPU spec file of each GPU target: a plan depends on each of them.

:func:`reference_step` is a gradient of 8 scanned residual MLP layers;
``python -m examples.tools.plan_records record`` compiles it for every target whose compiler is
installed, under three policies (saving everything, the dots, nothing), and writes
``data/plans/reference.json``. A test marked ``plans`` compiles it again and compares
(``tests/tools/test_plan_records.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec

from examples.tools import compat, recorded
from examples.tools.plans import NO_REMAT, SCHEMA, Plans, plan


def save(plans: Plans, path: str | Path) -> Path:
    """Write ``plans`` as a new JSON record (never replacing a file)."""
    return recorded.write_new(path, plans.as_dict())


def load(path: str | Path) -> tuple[Plans, dict[str, Any]]:
    """A record's plans and its ``runinfo``."""
    data, _ = recorded.read(path, {SCHEMA: 1}, fields={"plans": list})
    return Plans.from_dict(data), data["runinfo"]


# --- the reference program: a small step whose plans are committed ------------------------------

REFERENCE = recorded.folder("plans") / "reference.json"
REFERENCE_POLICIES = (
    "everything_saveable",
    "dots_with_no_batch_dims_saveable",
    "nothing_saveable",
)


def reference_step(policy: Any) -> Callable[..., Any]:
    """A gradient of 8 scanned residual tanh-MLP layers: compiled in seconds, and with enough
    activations per device (a 32768 x 1024 bf16 batch) that every target stores some."""

    def loss(w: jax.Array, x: jax.Array) -> jax.Array:
        def layer(h: jax.Array, wi: jax.Array) -> tuple[jax.Array, None]:
            return h + jnp.tanh(jnp.tanh(h @ wi[0]) @ wi[1]), None

        if policy is not NO_REMAT:
            layer = jax.checkpoint(layer, policy=policy)
        return jnp.mean(jax.lax.scan(layer, x, w)[0] ** 2)

    return jax.grad(loss)


def reference_args() -> tuple[jax.ShapeDtypeStruct, jax.ShapeDtypeStruct]:
    return (
        jax.ShapeDtypeStruct((8, 2, 1024, 1024), jnp.bfloat16),
        jax.ShapeDtypeStruct((32768, 1024), jnp.bfloat16),
    )


REFERENCE_SPECS = (PartitionSpec(), PartitionSpec("fsdp"))


def reference_policies() -> dict[str, Any]:
    return {
        n: NO_REMAT if n == "no remat" else compat.checkpoint_policy(n) for n in REFERENCE_POLICIES
    }


#: The largest slice the reference step is recorded on; larger ones are for the 8B model.
REFERENCE_MAX_DEVICES = 8


def reference_targets(targets: Mapping[str, Any]) -> list[str]:
    """The accelerator targets the reference record covers: every one of up to
    :data:`REFERENCE_MAX_DEVICES` devices."""
    return [n for n, t in targets.items()
            if t.platform != "cpu" and t.device_count <= REFERENCE_MAX_DEVICES]  # fmt: skip


def reference_plans(targets: Sequence[str]) -> Plans:
    return plan(reference_step, *reference_args(), targets=targets,
                policies=reference_policies(), in_specs=REFERENCE_SPECS)  # fmt: skip


def main(argv: Sequence[str]) -> int:
    """``python -m examples.tools.plan_records record [PATH]``: compile the reference step for
    every target whose compiler is installed and write its record (by default
    ``data/plans/reference.json``)."""
    from examples.tools.targets import TARGETS, compiler_available

    if not argv or argv[0] != "record":
        print(main.__doc__)
        return 2
    path = Path(argv[1]) if len(argv) > 1 else REFERENCE
    names = [n for n in reference_targets(TARGETS) if compiler_available(n)]
    plans = reference_plans(names)
    print(plans.table().to_text())
    print(f"wrote {save(plans, path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
