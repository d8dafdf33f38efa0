"""How-to "Will it fit?": the decoder of :mod:`examples.howto.fit_model` compiled for GPUs and TPUs.

The records of ``docs/howto/will-it-fit.md`` are written here, on a machine with the target
compilers installed (``nox -s plans``; see :mod:`examples.tools.targets`), by

    python -m examples.howto.fit --target "h100-80gb x8" --config 1b --batch 4 \\
        --largest 1 64 --out src/examples/data/plans/fit-h100x8-1b.json

which compiles one training step per policy (:data:`examples.howto.fit_model.POLICIES`) at the
given per-device batch and, with ``--largest LO HI``, bisects over per-device batches for the
largest each policy fits within the target's budget (every compile kept: the fit and the
failure above it). ``--xla-remat-off`` compiles each plan that fits again with XLA's own
rematerialization pass off (``--xla-remat-off-at LABEL@BATCH`` names plans to do so for). A
record never replaces an existing file. The page renders the records with :func:`load_all` and
the functions below, which judge every plan against its budget again and count each step's
FLOPs from its program (:func:`program_flops`); nothing here needs the compilers to read a
record.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import functools
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
from examples.tools.plans import Plan, Plans, compile_plan, largest_batch, plan, step_flops
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
    #: policy -> per-device batch -> the plan compiled again with XLA's own rematerialization
    #: pass disabled (``--xla_disable_hlo_passes=rematerialization``)
    xla_remat_off: dict[str, dict[int, Plan]] = dataclasses.field(default_factory=dict)

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
            "xla_remat_off": {
                label: {str(b): p.as_dict() for b, p in sorted(by_batch.items())}
                for label, by_batch in self.xla_remat_off.items()
            },
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
        off = {
            label: {int(b): Plan.from_dict(p) for b, p in by_batch.items()}
            for label, by_batch in data.get("xla_remat_off", {}).items()
        }
        return Record(data["runinfo"], data["target"], data["model"], data["batch"], plans,
                      largest, off)  # fmt: skip
    except (KeyError, TypeError) as err:
        raise FitRecordError(f"{path.name}: {err!r}") from err


def load_all(folder: str | Path = PLANS) -> list[Record]:
    """Every fit record in ``folder`` (``fit-*.json``), those of one target and model merged
    (compiles are slow, so one target's plans and batch searches may be recorded in parts)."""
    merged: dict[tuple[str, str], Record] = {}
    loaded = [(path, load(path)) for path in sorted(Path(folder).glob("fit-*.json"))]
    # oldest first, so that a newer compile of the same policy and batch replaces an older one
    for path, rec in sorted(loaded, key=lambda pr: (pr[1].runinfo.get("date", ""), pr[0].name)):
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
        for label, by_batch in rec.xla_remat_off.items():
            first.xla_remat_off.setdefault(label, {}).update(by_batch)
    order = list(fm.POLICIES)
    for rec in merged.values():
        rec.plans.sort(key=lambda p: order.index(p.label) if p.label in order else len(order))
        _complete(rec)
        rec.largest.sort(key=lambda s: order.index(s.label) if s.label in order else len(order))
    return list(merged.values())


def _complete(rec: Record) -> None:
    """One search per policy: the compiles of every search of it, and the plan of that policy
    at the record's common batch, are all evidence for the largest batch within the budget
    (:func:`within_budget`)."""
    by_label: dict[str, Search] = {}
    for s in rec.largest:
        if s.label in by_label:
            by_label[s.label].tried.update(s.tried)
        else:
            by_label[s.label] = Search(s.label, s.batch, s.fail_batch, dict(s.tried))
    for s in by_label.values():
        common = next((p for p in rec.plans if p.label == s.label), None)
        if common is not None and rec.batch not in s.tried:
            s.tried[rec.batch] = common
        s.batch, s.fail_batch = within_budget(s)
    rec.largest = list(by_label.values())


# --- compiling ------------------------------------------------------------------------------------


def _mesh(target: str) -> Mesh:
    return Mesh(np.array(devices(target), dtype=object), ("fsdp",))


#: The compiler option that turns XLA's own rematerialization pass off.
XLA_REMAT_OFF = {"xla_disable_hlo_passes": "rematerialization"}


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
    p = argparse.ArgumentParser(prog="python -m examples.howto.fit", description=__doc__)
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
    if argv[:1] == ["explorer"]:  # python -m examples.howto.fit explorer PATH
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


# --- what the page shows --------------------------------------------------------------------------

#: Where each platform's "compiler's count" of FLOPs comes from (:attr:`Plan.cost_source`).
COST_SOURCES = {
    "compiled": "the compiler's own cost analysis",
    "compiled HLO, XLA's CPU cost analysis": (
        "XLA's CPU cost model applied to the GPU-compiled module (compile-only GPUs report none)"
    ),
}
#: The FLOPs every table counts per step (:func:`program_flops`).
PROGRAM_FLOPS = (
    "matrix-multiply FLOPs of the step's program (its jaxpr, before XLA), every layer counted"
)


@functools.cache
def program_flops(cfg: fm.ModelConfig, label: str) -> float:
    """One sequence's share of a training step's matmul FLOPs under a policy, every scanned
    layer counted (:func:`~examples.tools.plans.step_flops`; the same for every target, and
    proportional to the batch)."""
    return step_flops(fm.make_step(cfg, fm.POLICIES[label]), *fm.abstract_args(cfg, 1))


def recompute_ratio(cfg: fm.ModelConfig, label: str) -> float:
    """A full step's matmul FLOPs under ``label`` over no remat's, at the same batch."""
    return program_flops(cfg, label) / program_flops(cfg, "no remat")


def xla_remat_off(rec: Record, label: str, batch: int) -> Plan | None:
    """The plan at ``batch`` compiled again with XLA's rematerialization pass off, if recorded."""
    return rec.xla_remat_off.get(label, {}).get(batch)


def fits_only_through_xla(rec: Record, p: Plan, batch: int) -> bool:
    """The plan fits, and the same compile with XLA's own rematerialization pass off does not."""
    off = xla_remat_off(rec, p.label, batch)
    return p.fits and off is not None and not off.fits


def verdict(p: Plan, rec: Record | None = None, batch: int | None = None) -> str:
    """A plan against its budget, in words."""
    if p.error is not None:
        return "refused: out of memory"
    if not p.fits:
        return "over budget"
    if rec is not None and batch is not None and fits_only_through_xla(rec, p, batch):
        return "fits only through XLA's own remat"
    return "fits"


def _tflops(x: float | None) -> str:
    return "n/a" if x is None else f"{x / 1e12:,.1f}"


def _gib(n: int | None) -> str:
    return "n/a" if n is None else format_bytes(n)


def budget_text(rec: Record) -> str:
    """The budget of a record's plans, and what is compared with it."""
    t = find_target(rec.target["name"])
    judged = "the compiler's peak" if t.platform == "tpu" else "the plan's total"
    return f"budget {format_bytes(t.budget_bytes)} per device ({t.budget_source}), against {judged}"


def cost_source(plans: Sequence[Plan]) -> str:
    sources = {p.cost_source for p in plans if p.cost_source}
    return "; ".join(COST_SOURCES.get(s, s) for s in sorted(sources)) or "none reported"


def caption(rec: Record, what: str) -> str:
    """A table's caption: plan, the target, the budget, where the FLOPs come from."""
    cfg = rec.config
    return (
        f"{what}: {rec.target['name']}, the {cfg.name.upper()} model; {budget_text(rec)}. "
        f"TFLOPs per step: {PROGRAM_FLOPS}. The compiler's count: "
        f"{cost_source(rec.plans or [p for s in rec.largest for p in s.tried.values()])}, "
        f"which counts the scanned layer once."
    )


def plans_table(rec: Record) -> Table:
    """One row per policy at the record's batch: per-device bytes, the verdict against the
    budget, the step's FLOPs (every layer) and their ratio to no remat's, the compiler's count."""
    cfg, rows = rec.config, []
    for p in rec.plans:
        step = program_flops(cfg, p.label) * rec.batch
        rows.append([
            f"`{p.label}`", _gib(p.temp_bytes), _gib(p.total_bytes), _gib(p.peak_bytes),
            verdict(p, rec, rec.batch), _tflops(step),
            f"{recompute_ratio(cfg, p.label):.2f}×", _tflops(p.flops),
        ])  # fmt: skip
    header = ["policy", "temporaries", "total", "compiler's peak", "plan", "TFLOPs per step",
              "vs no remat", "compiler's count"]  # fmt: skip
    return Table(header, rows, caption=caption(rec, f"Plan at {rec.batch} sequences per device"))


def verdict_line(rec: Record, plans: Sequence[tuple[Plan, int]] | None = None) -> str:
    """One line: which policies fit within the budget, and the one with least recomputation."""
    if plans is None:
        plans = [(p, rec.batch) for p in rec.plans]
    cfg = rec.config
    fitting = [(p, b) for p, b in plans if p.fits and not fits_only_through_xla(rec, p, b)]
    budget = format_bytes(find_target(rec.target["name"]).budget_bytes)
    if not fitting:
        return f"**Verdict:** no policy here fits within the {budget} budget."
    best, _ = min(fitting, key=lambda pb: (recompute_ratio(cfg, pb[0].label), pb[0].label))
    names = ", ".join(f"`{p.label}`" for p, _ in fitting)
    return (
        f"**Verdict:** within the {budget} budget, {names} fit; the least recomputation among "
        f"them is `{best.label}` ({recompute_ratio(cfg, best.label):.2f}× no remat's FLOPs per "
        f"step)."
    )


def within_budget(s: Search) -> tuple[int | None, int | None]:
    """The largest tried batch whose plan fits the budget, and the smallest tried batch above
    it that does not (None where no tried batch is). A record searched against another limit
    keeps its compiles; the answer is exact where the two are one batch apart."""
    fitting = [b for b, p in s.tried.items() if p.fits]
    best = max(fitting) if fitting else None
    above = [b for b, p in s.tried.items() if not p.fits and (best is None or b > best)]
    return best, (min(above) if above else None)


def largest_rows(rec: Record) -> list[tuple[Search, int | None, int | None]]:
    return [(s, *within_budget(s)) for s in rec.largest]


def largest_table(rec: Record) -> Table:
    """Per policy: the largest per-device batch within the budget, its plan, the same compile
    with XLA's own remat off, the FLOPs XLA added, and the step's FLOPs per sequence."""
    cfg, rows = rec.config, []
    for s, best, above in largest_rows(rec):
        if best is None:
            answer = f"none from {above}" if above is not None else "none"
        elif above is None or above > best + 1:
            answer = f"at least {best}"
        else:
            answer = str(best)
        fit = None if best is None else s.tried[best]
        off = None if best is None else xla_remat_off(rec, s.label, best)
        added = None
        if fit is not None and off is not None and fit.flops is not None and off.flops is not None:
            added = fit.flops - off.flops
        rows.append([
            f"`{s.label}`", answer,
            "n/a" if fit is None else _gib(fit.judged_bytes),
            "n/a" if fit is None else verdict(fit, rec, best),
            "not compiled" if off is None else f"{_gib(off.judged_bytes)}, {verdict(off)}",
            "n/a" if added is None else _tflops(added),
            f"{program_flops(cfg, s.label) / 1e12:,.1f}",
            f"{recompute_ratio(cfg, s.label):.2f}×",
        ])  # fmt: skip
    header = ["policy", "largest batch per device", "its plan", "verdict",
              "with XLA's remat off", "compiler's TFLOPs added by XLA's remat",
              "TFLOPs per sequence", "vs no remat"]  # fmt: skip
    return Table(header, rows, caption=caption(rec, "Plans found by compiling"))


def largest_verdict_line(rec: Record) -> str:
    """One line: each policy's largest batch within the budget, and the least recomputation."""
    cfg, parts, fitting = rec.config, [], []
    for s, best, above in largest_rows(rec):
        if best is None:
            parts.append(f"`{s.label}` none")
            continue
        only_xla = fits_only_through_xla(rec, s.tried[best], best)
        exact = above is not None and above == best + 1
        parts.append(f"`{s.label}` {'' if exact else 'at least '}{best}"
                     + (" (only through XLA's own remat)" if only_xla else ""))  # fmt: skip
        if not only_xla:
            fitting.append(s.label)
    budget = format_bytes(find_target(rec.target["name"]).budget_bytes)
    line = f"**Verdict:** sequences per device within the {budget} budget: {', '.join(parts)}."
    if not fitting:
        return line + " No policy fits."
    best_label = min(fitting, key=lambda label: (recompute_ratio(cfg, label), label))
    return line + (
        f" The least recomputation among them: `{best_label}` "
        f"({recompute_ratio(cfg, best_label):.2f}× no remat's FLOPs per step)."
    )


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


def explorer_table(plans: Plans, measured: Any, plan_jax: str) -> Table:
    """The explorer's H100 record (compiled on a GPU, jax of that run) beside the compile-only
    H100 plan of this page's jax: both are the compiler's plans, not measured peaks."""
    rows = []
    for p in plans.plans:
        result = next((r for r in measured.results if r.policy == p.label), None)
        if result is None or p.temp_bytes is None:
            continue
        rows.append([f"`{p.label}`", format_bytes(result.temp_bytes), format_bytes(p.temp_bytes),
                     f"{p.temp_bytes / result.temp_bytes:.2f}×"])  # fmt: skip
    jax_run, jax_plan = measured.runinfo["jax"], plan_jax
    return Table(["policy", f"plan on an H100 (jax {jax_run})",
                  f"compile-only plan (jax {jax_plan})", "ratio"], rows,
                 caption="Plans (temporaries per device), both from the H100 compiler's "
                         "memory_analysis(); neither is a measured peak")  # fmt: skip


def near_limit_table(rec: Record, label: str = "no remat") -> Table:
    """One policy's compiles near the budget: what the compiler did as the plan outgrew it."""
    rows = []
    for s in rec.largest:
        if s.label != label:
            continue
        for batch in sorted(s.tried):
            p = s.tried[batch]
            rows.append([
                str(batch), _gib(p.temp_bytes), _gib(p.total_bytes),
                "n/a" if p.flops is None else f"{p.flops / batch / 1e9:,.0f}",
                verdict(p, rec, batch),
            ])  # fmt: skip
    header = ["batch per device", "temporaries", "total", "compiler's GFLOPs per sequence",
              "plan"]  # fmt: skip
    return Table(header, rows, caption=caption(rec, f"Plans of `{label}` near the budget"))


def first_error(records: Sequence[Record]) -> tuple[Record, Plan]:
    """The first plan the compiler refused, with its record."""
    for rec in records:
        for p in rec.plans:
            if p.error is not None:
                return rec, p
    raise LookupError("no record holds a compiler out-of-memory error")


def xla_log_lines(records: Sequence[Record], needle: str) -> list[tuple[Record, Plan, str]]:
    """Every logged compiler line containing ``needle``, with its record and plan."""
    found = []
    for rec in records:
        plans = [*rec.plans, *(p for s in rec.largest for p in s.tried.values())]
        plans += [p for by_batch in rec.xla_remat_off.values() for p in by_batch.values()]
        for p in plans:
            found += [(rec, p, line) for line in p.log if needle in line]
    return found


# --- a time estimate ------------------------------------------------------------------------------

#: Published dense peak rates per device: (FLOP/s for bfloat16 matmuls, FLOP/s for float32 matmuls
#: as XLA runs them by default, HBM bytes/s, source).
PEAKS: dict[str, tuple[float, float, float, str]] = {
    "NVIDIA H100 80GB HBM3": (989e12, 494.5e12, 3.35e12, "NVIDIA H100 SXM data sheet (dense)"),
    "NVIDIA H200": (989e12, 494.5e12, 4.8e12, "NVIDIA H200 SXM data sheet (dense)"),
    "NVIDIA A100-SXM4-80GB": (312e12, 156e12, 2.039e12, "NVIDIA A100 data sheet (dense)"),
    "TPU v5 lite": (197e12, 197e12, 819e9, "Google Cloud TPU v5e documentation"),
    "TPU v6 lite": (918e12, 918e12, 1640e9, "Google Cloud TPU v6e documentation"),
    "TPU v5": (459e12, 459e12, 2765e9, "Google Cloud TPU v5p documentation"),
}


def peaks_for(device_kind: str) -> tuple[float, float, float, str]:
    for kind, peaks in PEAKS.items():
        if device_kind.startswith(kind):
            return peaks
    raise KeyError(f"no published peak rates for {device_kind!r}")


def roofline_seconds(flops: float, device_kind: str, dtype: str = "bfloat16") -> float:
    """The time of ``flops`` matmul FLOPs on one device at its published dense peak: a lower
    bound on a step's time (memory traffic, communication and other work not counted)."""
    bf16, f32, _bw, _ = peaks_for(device_kind)
    return flops / (bf16 if dtype == "bfloat16" else f32)


def estimate_table(rec: Record) -> Table:
    """Per policy at the record's batch: the compute-bound time estimate of one step."""
    cfg, rows = rec.config, []
    kind = rec.target["device_kind"]
    for p in rec.plans:
        step = program_flops(cfg, p.label) * rec.batch
        rows.append(
            [
                f"`{p.label}`",
                _tflops(step),
                f"{roofline_seconds(step, kind) * 1e3:,.0f} ms",
                verdict(p, rec, rec.batch),
            ]
        )
    _, _, _, where = peaks_for(kind)
    return Table(["policy", "TFLOPs per step per device", "estimate at peak", "plan"], rows,
                 caption=f"Estimate, not a measurement: {rec.target['name']}, the "
                         f"{cfg.name.upper()} model at {rec.batch} sequences per device; "
                         f"matmul FLOPs over the bfloat16 dense peak ({where})")  # fmt: skip


def estimate_verdict_line(rec: Record) -> str:
    """One line: of the plans that fit the budget, the one with the shortest estimate."""
    fitting = [p for p in rec.plans if p.fits and not fits_only_through_xla(rec, p, rec.batch)]
    if not fitting:
        return "**Verdict:** no plan here fits within the budget."
    best = min(fitting, key=lambda p: (program_flops(rec.config, p.label), p.label))
    step = program_flops(rec.config, best.label) * rec.batch
    ms = roofline_seconds(step, rec.target["device_kind"]) * 1e3
    return (
        f"**Verdict:** of the plans within the budget, `{best.label}` asks for the least work: "
        f"at least {ms:,.0f} ms a step at peak."
    )


def explorer_estimates(run: Any) -> Table:
    """The explorer's measured step times on a GPU beside the same step's compute-bound
    estimate (its float32 matmuls at the GPU's float32 dense peak, as XLA runs them)."""
    from examples.explorer import model as em
    from examples.tools.models import init_inputs, init_params

    cfg = run.config
    args = jax.eval_shape(lambda: (init_params(cfg), init_inputs(cfg)))
    kind = run.runinfo["device"]
    rows = []
    for r in run.results:
        if r.policy not in em.POLICIES or r.step_time_s is None:
            continue
        flops = step_flops(jax.grad(em.make_loss(cfg, em.POLICIES[r.policy])), *args)
        est = roofline_seconds(flops, kind, "float32")
        rows.append(
            [
                f"`{r.policy}`",
                f"{flops / 1e12:,.2f}",
                f"{est * 1e3:,.1f} ms",
                f"{r.step_time_s * 1e3:,.1f} ms",
                f"{est / r.step_time_s:.0%}",
            ]
        )
    _, _, _, where = peaks_for(kind)
    return Table(["policy", "TFLOPs per step", "estimate at peak", "measured",
                  "estimate / measured"], rows,
                 caption=f"Estimate beside measurement: the explorer's gradient on one {kind} "
                         f"(jax {run.runinfo['jax']}); the estimate is its float32 matmul FLOPs "
                         f"at the float32 (TF32) dense peak ({where})")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
