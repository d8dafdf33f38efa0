"""How-to "Will it fit?": the decoder of :mod:`examples.howto.fit_model` compiled for GPUs and TPUs.

The records of ``docs/howto/will-it-fit.md`` are written here, on a machine with the target
compilers installed (``nox -s plans``; see :mod:`examples.tools.targets`), by

    python -m examples.howto.fit --target "h100-80gb x8" --config 1b --batch 4 \\
        --largest 1 64 --out src/examples/data/plans/fit-h100x8-1b.json

which compiles one training step per policy (:data:`examples.howto.fit_model.POLICIES`) at the
given per-device batch and, with ``--largest LO HI``, bisects over per-device batches for the
largest each policy fits (every compile kept: the fit and the failure above it). A record never
replaces an existing file. The page renders the records with :func:`load` and the functions
below; nothing here needs the compilers to read a record.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as Spec

from examples.howto import fit_model as fm
from examples.tools import plan_records, recorded
from examples.tools.display import Table, format_bytes
from examples.tools.plans import Plan, Plans, compile_plan, largest_batch, plan
from examples.tools.targets import devices, machine
from examples.tools.targets import target as find_target

SCHEMA = "jax-remat-guide/fit/1"
PLANS = recorded.folder("plans")


class FitRecordError(recorded.RecordError):
    """A fit record that the recorder would not have written."""


@dataclasses.dataclass
class Search:
    """The largest per-device batch one policy fits on one target, and the compiles behind it."""

    label: str
    batch: int | None  #: the largest per-device batch that fits (None: not even the smallest)
    fail_batch: int | None  #: the batch above it, which does not fit (None: the largest tried fits)
    tried: dict[int, Plan]

    @property
    def fit(self) -> Plan | None:
        return None if self.batch is None else self.tried[self.batch]

    @property
    def fail(self) -> Plan | None:
        return None if self.fail_batch is None else self.tried[self.fail_batch]


@dataclasses.dataclass
class Record:
    """One target's plans for one model configuration."""

    runinfo: dict[str, Any]
    target: dict[str, Any]
    model: dict[str, Any]
    batch: int  #: the per-device batch of :attr:`plans`
    plans: list[Plan]
    largest: list[Search]

    @property
    def config(self) -> fm.ModelConfig:
        fields = {f.name for f in dataclasses.fields(fm.ModelConfig)}
        return fm.ModelConfig(**{k: v for k, v in self.model.items() if k in fields})

    def plan(self, label: str) -> Plan:
        for p in self.plans:
            if p.label == label:
                return p
        raise KeyError(f"{self.target['name']}: no plan for {label!r}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "runinfo": self.runinfo,
            "target": self.target,
            "model": self.model,
            "batch": self.batch,
            "plans": [p.as_dict() for p in self.plans],
            "largest": [
                {"label": s.label, "batch": s.batch, "fail_batch": s.fail_batch,
                 "tried": {str(b): p.as_dict() for b, p in sorted(s.tried.items())}}
                for s in self.largest
            ],
        }  # fmt: skip


def load(path: str | Path) -> Record:
    """Read a record written by :func:`main`, with errors naming the file and the problem."""
    path = Path(path)
    data, _ = recorded.read(path, {SCHEMA: 1}, FitRecordError, {"plans": list, "largest": list})
    try:
        plans = [Plan.from_dict(p) for p in data["plans"]]
        largest = [
            Search(s["label"], s["batch"], s["fail_batch"],
                   {int(b): Plan.from_dict(p) for b, p in s["tried"].items()})
            for s in data["largest"]
        ]  # fmt: skip
        return Record(data["runinfo"], data["target"], data["model"], data["batch"], plans, largest)
    except (KeyError, TypeError) as err:
        raise FitRecordError(f"{path.name}: {err!r}") from err


def load_all(folder: str | Path = PLANS) -> list[Record]:
    """Every fit record in ``folder`` (``fit-*.json``), those of one target and model merged
    (compiles are slow, so one target's plans and batch searches may be recorded in parts)."""
    merged: dict[tuple[str, str], Record] = {}
    for path in sorted(Path(folder).glob("fit-*.json")):
        rec = load(path)
        key = (rec.target["name"], rec.model["name"])
        if key not in merged:
            merged[key] = rec
            continue
        first = merged[key]
        for field in ("jax", "jaxlib", "compilers"):
            if first.runinfo.get(field) != rec.runinfo.get(field):
                raise FitRecordError(f"{path.name}: {field} differs from {key}'s other record")
        if rec.plans:
            first.plans += rec.plans
            first.batch = rec.batch
        first.largest += rec.largest
    order = list(fm.POLICIES)
    for rec in merged.values():
        _complete(rec)
        rec.largest.sort(key=lambda s: order.index(s.label) if s.label in order else len(order))
    return list(merged.values())


def _complete(rec: Record) -> None:
    """Where a search's largest batch fits and the plans' common batch is the one above it, under
    the same policy and not fitting, that plan is the failure above the answer: keep it."""
    for s in rec.largest:
        common = next((p for p in rec.plans if p.label == s.label), None)
        above = s.batch is not None and rec.batch == s.batch + 1
        if s.fail_batch is None and above and common is not None and not common.fits:
            s.fail_batch, s.tried[rec.batch] = rec.batch, common


# --- compiling ------------------------------------------------------------------------------------


def _mesh(target: str) -> Mesh:
    return Mesh(np.array(devices(target), dtype=object), ("fsdp",))


def compile_step(cfg: fm.ModelConfig, target: str, label: str, per_device: int) -> Plan:
    """The target compiler's plan for one training step under one policy (FSDP over every
    device, parameters and Adam's state donated)."""
    n = find_target(target).device_count
    weights, opt, _batch, _ = fm.in_specs(cfg)
    with jax.set_mesh(_mesh(target)):  # the model's activation constraints read this mesh
        return compile_plan(
            fm.make_step(cfg, fm.POLICIES[label]), *fm.abstract_args(cfg, per_device * n),
            target=target, label=label, in_specs=fm.in_specs(cfg),
            out_specs=(weights, opt, Spec()), donate_argnums=(0, 1),
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
) -> Record:
    """Compile every policy of ``labels`` at ``batch`` per device and, with ``largest``, search
    the largest batch of each of ``largest_labels`` (default: ``labels``). ``progress``: a file
    rewritten with the record so far after each policy (compiles are slow)."""
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
    return rec


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m examples.howto.fit", description=__doc__)
    p.add_argument("--target", required=True, help="a name of examples.tools.targets.TARGETS")
    p.add_argument("--config", required=True, choices=sorted(fm.CONFIGS))
    p.add_argument("--batch", type=int, default=0, help="sequences per device (with --policies)")
    p.add_argument("--policies", nargs="*", default=list(fm.POLICIES), metavar="LABEL")
    p.add_argument("--largest", nargs=2, type=int, metavar=("LO", "HI"))
    p.add_argument("--largest-policies", nargs="*", metavar="LABEL")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--progress", type=Path, help="a file rewritten with the record so far")
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
    if argv[:1] == ["explorer"]:  # python -m examples.howto.fit explorer PATH
        plans = explorer_plans()
        print(plans.table().to_text())
        print(f"wrote {plan_records.save(plans, argv[1])}")
        return 0
    args = parser().parse_args(argv)
    for label in [*args.policies, *(args.largest_policies or [])]:
        if label not in fm.POLICIES:
            parser().error(f"unknown policy {label!r}; known: {', '.join(map(repr, fm.POLICIES))}")
    if args.out.exists():
        parser().error(f"{args.out} exists; not overwriting it (remove it first)")
    rec = record(
        fm.CONFIGS[args.config], args.target, args.batch, args.policies,
        tuple(args.largest) if args.largest else None, args.largest_policies, args.progress,
    )  # fmt: skip
    recorded.write_new(args.out, rec.as_dict())
    print(plans_table(rec).to_text())
    return 0


# --- what the page shows --------------------------------------------------------------------------


def verdict(p: Plan) -> str:
    if p.error is not None:
        return "compiler: out of memory"
    return "fits" if p.fits else "over memory"


def plans_table(rec: Record) -> Table:
    """One row per policy: per-device bytes against the device's memory, FLOPs, the verdict."""
    rows = []
    for p in rec.plans:
        na = "n/a"
        rows.append([
            f"`{p.label}`",
            na if p.temp_bytes is None else format_bytes(p.temp_bytes),
            na if p.argument_bytes is None else format_bytes(p.argument_bytes),
            na if p.output_bytes is None else format_bytes(p.output_bytes),
            na if p.alias_bytes is None else format_bytes(p.alias_bytes),
            na if p.total_bytes is None else format_bytes(p.total_bytes),
            format_bytes(p.memory_bytes),
            na if p.flops is None else f"{p.flops / 1e12:,.1f}",
            verdict(p),
        ])  # fmt: skip
    header = ["policy", "temporaries", "arguments", "outputs", "aliased", "total",
              "device memory", "TFLOPs", "plan"]  # fmt: skip
    return Table(header, rows)


if __name__ == "__main__":
    sys.exit(main())


def source(rec: Record) -> str:
    """Where a record's plans came from: the target, the machine, every version, the date."""
    info, t = rec.runinfo, rec.target
    compilers = ", ".join(f"{k} {v}" for k, v in sorted(info.get("compilers", {}).items()))
    spec = f", GPU spec `{t['spec']}`" if t.get("spec") else ""
    return (
        f"{t['device_count']} × {t['device_kind']} ({t['name']}{spec}; device memory: "
        f"{t['memory_source']}), compiled on {info['device']} with jax {info['jax']}, "
        f"jaxlib {info['jaxlib']}, {compilers or 'no accelerator compiler'}, on {info['date']}"
    )


def flops_per_sequence(p: Plan, batch: int) -> float | None:
    """The plan's FLOPs per sequence of one device (``None`` where the plan has none)."""
    return None if p.flops is None else p.flops / batch


def largest_table(rec: Record) -> Table:
    """Per policy: the largest per-device batch that fits, its total against the device's memory,
    the batch above and what the compiler said of it, and the FLOPs per sequence at that batch
    against no remat's at the largest batch no remat fits."""
    base = next((s for s in rec.largest if s.label == "no remat"), None)
    base_flops = None if base is None or base.fit is None else base.fit.flops
    base_per_seq = None if base is None or base_flops is None else base_flops / (base.batch or 1)
    rows = []
    for s in rec.largest:
        fit, fail = s.fit, s.fail
        per_seq = None if fit is None or s.batch is None else flops_per_sequence(fit, s.batch)
        ratio = "n/a" if not per_seq or not base_per_seq else f"{per_seq / base_per_seq:.2f}×"
        rows.append([
            f"`{s.label}`",
            "none" if s.batch is None else str(s.batch),
            "n/a" if fit is None or fit.total_bytes is None else format_bytes(fit.total_bytes),
            "none tried" if s.fail_batch is None else str(s.fail_batch),
            "n/a" if fail is None else _fail_text(fail),
            ratio,
        ])  # fmt: skip
    header = ["policy", "largest batch per device", "its total", "next batch", "its plan",
              "FLOPs per sequence vs no remat"]  # fmt: skip
    return Table(header, rows)


def _fail_text(p: Plan) -> str:
    if p.error is not None and p.error.required_bytes:
        return f"compiler: out of memory ({format_bytes(p.error.required_bytes)} of temporaries)"
    if p.total_bytes is not None:
        return f"{format_bytes(p.total_bytes)}: over memory"
    return verdict(p)


def explorer_table(plans: Plans, measured: Any) -> Table:
    """The explorer's H100 record (measured on the GPU) beside the H100 compiler's plan."""
    rows = []
    for p in plans.plans:
        result = next((r for r in measured.results if r.policy == p.label), None)
        if result is None or p.temp_bytes is None:
            continue
        rows.append([f"`{p.label}`", format_bytes(result.temp_bytes), format_bytes(p.temp_bytes),
                     f"{p.temp_bytes / result.temp_bytes:.2f}×"])  # fmt: skip
    return Table(["policy", "measured on an H100 (temporaries)", "planned (temporaries)",
                  "plan / measured"], rows)  # fmt: skip


def near_limit_table(rec: Record, label: str = "no remat") -> Table:
    """One policy's plans at the largest batch that fits and the batch above it: what the
    compiler did when the plan outgrew the device (FLOPs per sequence show any recomputation
    it added on its own)."""
    rows = []
    for s in rec.largest:
        if s.label != label:
            continue
        for batch in sorted(s.tried):
            p = s.tried[batch]
            per_seq = flops_per_sequence(p, batch)
            rows.append([
                str(batch),
                "n/a" if p.temp_bytes is None else format_bytes(p.temp_bytes),
                "n/a" if p.total_bytes is None else format_bytes(p.total_bytes),
                format_bytes(p.memory_bytes),
                "n/a" if per_seq is None else f"{per_seq / 1e9:,.0f}",
                verdict(p),
            ])  # fmt: skip
    header = ["batch per device", "temporaries", "total", "device memory",
              "GFLOPs per sequence", "plan"]  # fmt: skip
    return Table(header, rows)


def first_error(records: Sequence[Record]) -> tuple[Record, Plan]:
    """The first plan the compiler refused, with its record."""
    for rec in records:
        for p in rec.plans:
            if p.error is not None:
                return rec, p
    raise LookupError("no record holds a compiler out-of-memory error")


def flops_sentence(rec: Record, other: str = "minimal (MaxText)") -> str:
    """How no remat's FLOPs compare with ``other``'s in one record's plans, in words."""
    none, kept = rec.plan("no remat"), rec.plan(other)
    if none.flops is None or kept.flops is None:
        return "The compiler reported no FLOPs for these plans."
    figures = (
        f"Without remat the plan counts {none.flops / 1e12:,.1f} TFLOPs, and with "
        f"{other}, which recomputes attention, {kept.flops / 1e12:,.1f}"
    )
    if none.flops <= kept.flops or none.fits:
        return f"{figures}."
    return (
        f"{figures}. The plan that asks for no recomputation does more work. It is over the "
        f"device's memory, and there XLA's GPU compiler runs its own rematerialization pass, "
        f"which recomputes values jax.checkpoint never asked it to: the likeliest source of "
        f"the extra FLOPs."
    )
