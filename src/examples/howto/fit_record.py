"""How-to "Will it fit?": the recorder that compiles the decoder for GPUs and TPUs.

Run on a machine with the target compilers installed (``nox -s plans``)::

    python -m examples.howto.fit_record --target "h100-80gb x8" --config 8b --batch 2 \\
        --largest 18 22 --largest-policies nothing_saveable --xla-remat-off \\
        --out src/examples/data/plans/fit-h100x8-8b-budget-nothing.json

It compiles one training step per policy (:data:`examples.howto.fit_model.POLICIES`) at the
given per-device batch; with ``--largest LO HI`` it bisects over per-device batches for the
largest each policy fits within the target's budget (every compile kept); ``--xla-remat-off``
compiles each plan that fits again with XLA's own rematerialization pass off. A record
(:class:`examples.howto.fit.Record`) never replaces an existing file.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as Spec

from examples.howto import fit_model as fm
from examples.howto.fit import XLA_REMAT_OFF, Record, Search, plans_table
from examples.tools import plan_records, recorded
from examples.tools.plans import Plan, Plans, compile_plan, largest_batch, plan
from examples.tools.targets import devices, machine
from examples.tools.targets import target as find_target

# --- compiling ------------------------------------------------------------------------------------


def _mesh(target: str) -> Mesh:
    return Mesh(np.array(devices(target), dtype=object), ("fsdp",))


def compile_step(
    cfg: fm.ModelConfig, target: str, label: str, per_device: int,
    compiler_options: dict[str, str] | None = None,
) -> Plan:  # fmt: skip
    """The target compiler's plan for one training step under one policy (FSDP over every
    device, parameters and Adam's state donated)."""
    n = find_target(target).device_count
    weights, opt, _batch, _ = fm.in_specs(cfg)
    with jax.set_mesh(_mesh(target)):  # the model's activation constraints read this mesh
        return compile_plan(
            fm.make_step(cfg, fm.POLICIES[label]), *fm.abstract_args(cfg, per_device * n),
            target=target, label=label, in_specs=fm.in_specs(cfg),
            out_specs=(weights, opt, Spec()), donate_argnums=(0, 1),
            compiler_options=compiler_options,
        )  # fmt: skip


def search(cfg: fm.ModelConfig, target: str, label: str, lo: int, hi: int) -> Search:
    """The largest per-device batch in ``lo..hi`` whose plan fits, by bisection."""
    n = find_target(target).device_count
    weights, opt, _, _ = fm.in_specs(cfg)
    with jax.set_mesh(_mesh(target)):
        found = largest_batch(
            lambda b: fm.abstract_args(cfg, b * n),
            lambda policy: fm.make_step(cfg, policy),
            fm.POLICIES[label], target, lo, hi, label=label,
            in_specs=fm.in_specs(cfg), out_specs=(weights, opt, Spec()), donate_argnums=(0, 1),
        )  # fmt: skip
    return Search(label, found.batch, found.fail_batch, found.tried)


def record(
    cfg: fm.ModelConfig,
    target: str,
    batch: int,
    labels: Sequence[str],
    largest: tuple[int, int] | None = None,
    largest_labels: Sequence[str] | None = None,
    progress: Path | None = None,
    xla_remat_off: bool = False,
) -> Record:
    """Compile every policy of ``labels`` at ``batch`` per device and, with ``largest``, search
    the largest batch of each of ``largest_labels`` (default: ``labels``) that fits the target's
    budget. With ``xla_remat_off``, every plan that fits (at ``batch``, and each search's answer)
    is compiled again with XLA's own rematerialization pass off. ``progress``: a file rewritten
    with the record so far after each policy (compiles are slow)."""
    info = {**machine(), "date": datetime.date.today().isoformat()}
    model = {**dataclasses.asdict(cfg), "params": fm.param_count(cfg)}
    rec = Record(info, find_target(target).as_dict(), model, batch, [], [])

    def done(what: str) -> None:
        print(what, file=sys.stderr, flush=True)
        if progress is not None:
            progress.write_text(json.dumps(rec.as_dict(), indent=1) + "\n", encoding="utf-8")

    for label in labels:
        rec.plans.append(compile_step(cfg, target, label, batch))
        done(f"{label}: {rec.plans[-1].compile_seconds:.1f} s, fits: {rec.plans[-1].fits}")
    if largest is not None:
        for label in largest_labels or labels:
            rec.largest.append(search(cfg, target, label, *largest))
            done(f"largest {label}: {rec.largest[-1].batch}")
    if xla_remat_off:
        fitting = [(p.label, batch) for p in rec.plans if p.fits]
        fitting += [(s.label, s.batch) for s in rec.largest if s.batch is not None]
        for label, b in dict.fromkeys(fitting):
            off = compile_step(cfg, target, label, b, XLA_REMAT_OFF)
            rec.xla_remat_off.setdefault(label, {})[b] = off
            done(f"{label} at {b}, XLA's rematerialization off: fits: {off.fits}")
    return rec


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.howto.fit_record", description=__doc__)
    p.add_argument("--target", required=True, help="a name of examples.tools.targets.TARGETS")
    p.add_argument("--config", required=True, choices=sorted(fm.CONFIGS))
    p.add_argument("--batch", type=int, default=0, help="sequences per device (with --policies)")
    p.add_argument(
        "--policies",
        nargs="*",
        default=None,
        metavar="LABEL",
        help="policies to plan at --batch (default: all of them, if --batch is given)",
    )
    p.add_argument("--largest", nargs=2, type=int, metavar=("LO", "HI"))
    p.add_argument("--largest-policies", nargs="*", metavar="LABEL")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--progress", type=Path, help="a file rewritten with the record so far")
    p.add_argument(
        "--xla-remat-off",
        action="store_true",
        help="compile each plan that fits again with XLA's rematerialization pass off",
    )
    p.add_argument(
        "--xla-remat-off-at",
        nargs="*",
        default=[],
        metavar="LABEL@BATCH",
        help="compile these (policy, per-device batch) with XLA's pass off",
    )
    return p


#: The explorer's policies planned beside its measured H100 record.
EXPLORER_POLICIES = ("no remat", "dots_with_no_batch_dims_saveable", "nothing_saveable")


def explorer_plans(target: str = "h100-80gb") -> Plans:
    """The explorer's gradient (its config of the committed H100 record, float32) compiled for
    one H100: the plan to set beside what that record measured on the GPU."""
    from examples.explorer import data
    from examples.explorer import model as em
    from examples.tools.models import init_inputs, init_params

    cfg = data.load(data.RUNS / "nvidia-h100.json").config
    args = jax.eval_shape(lambda: (init_params(cfg), init_inputs(cfg)))
    return plan(lambda policy: jax.grad(em.make_loss(cfg, policy)), *args, targets=[target],
                policies={k: em.POLICIES[k] for k in EXPLORER_POLICIES})  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["explorer"]:  # python -m examples.howto.fit_record explorer PATH
        plans = explorer_plans()
        print(plans.table().to_text())
        print(f"wrote {plan_records.save(plans, argv[1])}")
        return 0
    args = parser().parse_args(argv)
    if args.policies is None:
        args.policies = list(fm.POLICIES) if args.batch else []
    for label in [*args.policies, *(args.largest_policies or [])]:
        if label not in fm.POLICIES:
            parser().error(f"unknown policy {label!r}; known: {', '.join(map(repr, fm.POLICIES))}")
    if args.out.exists():
        parser().error(f"{args.out} exists; not overwriting it (remove it first)")
    rec = record(
        fm.CONFIGS[args.config], args.target, args.batch, args.policies,
        tuple(args.largest) if args.largest else None, args.largest_policies, args.progress,
        args.xla_remat_off,
    )  # fmt: skip
    for item in args.xla_remat_off_at:
        label, _, b = item.rpartition("@")
        if label not in fm.POLICIES:
            parser().error(f"unknown policy {label!r} in {item!r}")
        off = compile_step(fm.CONFIGS[args.config], args.target, label, int(b), XLA_REMAT_OFF)
        rec.xla_remat_off.setdefault(label, {})[int(b)] = off
        print(f"{label} at {b}, XLA's rematerialization off: fits: {off.fits}", file=sys.stderr)
        if args.progress is not None:
            args.progress.write_text(json.dumps(rec.as_dict(), indent=1) + "\n", encoding="utf-8")
    recorded.write_new(args.out, rec.as_dict())
    if rec.plans:
        print(plans_table(rec).to_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
