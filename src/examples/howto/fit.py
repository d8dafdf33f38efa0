"""How-to "Will it fit?": the records of the decoder of :mod:`examples.howto.fit_model`
compiled for GPUs and TPUs, and the page's tables of them.

:mod:`examples.howto.fit_record` writes the records (on a machine with the target compilers,
``nox -s plans``); :func:`load_all` reads them from ``src/examples/data/plans/``, merging those
of one target and model. The functions below judge every plan against its target's budget again
(an older record gets the budget when read), count each step's FLOPs from its program
(:func:`program_flops`, every layer counted), mark a plan that fits only because XLA's own
rematerialization pass recomputed, and end each table with its verdict.
:mod:`examples.howto.fit_estimate` adds a time estimate. Nothing here needs the compilers.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from examples.howto import fit_model as fm
from examples.tools import recorded
from examples.tools.display import Table, format_bytes
from examples.tools.plan_flops import step_flops
from examples.tools.plans import Plan, Plans
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


#: The compiler option that turns XLA's own rematerialization pass off.
XLA_REMAT_OFF = {"xla_disable_hlo_passes": "rematerialization"}


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
    layer counted (:func:`~examples.tools.plan_flops.step_flops`; the same for every target, and
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


def xla_warning(
    records: Sequence[Record], label: str, needle: str = "Can't reduce memory use"
) -> tuple[Record, Plan, str]:
    """The first warning of XLA's rematerialization pass logged for a plan of ``label``
    compiled with the pass on, with its record and plan."""
    for rec, p, line in xla_log_lines(records, needle):
        if p.label == label and not p.xla_remat_off:
            return rec, p, line
    raise LookupError(f"no record holds XLA's warning {needle!r} for {label!r}")


def xla_log_lines(records: Sequence[Record], needle: str) -> list[tuple[Record, Plan, str]]:
    """Every logged compiler line containing ``needle``, with its record and plan."""
    found = []
    for rec in records:
        plans = [*rec.plans, *(p for s in rec.largest for p in s.tried.values())]
        plans += [p for by_batch in rec.xla_remat_off.values() for p in by_batch.values()]
        for p in plans:
            found += [(rec, p, line) for line in p.log if needle in line]
    return found
