"""Host offload of residuals: memory kinds, the two offloading policies, and what a backend does.

``save_and_offload_only_these_names`` and ``offload_dot_with_no_batch_dims`` ask JAX to keep
some residuals in host memory (``"pinned_host"``) instead of device memory between the forward
and the backward pass. Whether anything moves is the backend's business, and this module reads
each stage of the answer: the transfers JAX traces (``device_put`` equations to host memory and
back), the placement annotations in the lowered program, the host buffers in the compiled one,
and XLA's device and host memory analyses. On a GPU, ``python -m examples.howto.offload --out
FILE.json`` records all of it with step times; the how-to page renders such files, committed
under ``src/examples/data/offload/`` (:data:`RUNS`, :mod:`examples.tools.recorded`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.export  # an attribute of jax only once imported, on older releases

from examples.howto.collectives import hlo_text
from examples.tools import recorded
from examples.tools.display import Table, format_bytes
from examples.tools.jaxprs import equation_jaxprs, open_jaxpr
from examples.tools.measure import (
    MIN_REPEATS,
    Timing,
    compile_for_analysis,
    stats_of,
    time_call,
)
from examples.tools.models import SIZES, Config, block, init_inputs, init_params, scan_loss
from examples.tools.runinfo import collect

SCHEMA = "jax-remat-guide/offload/1"
#: Where recorded runs are committed (they ship with the package).
RUNS = recorded.folder("offload")
_CP = jax.checkpoint_policies

OFFLOAD_NAMES = "save_and_offload_only_these_names(offload 'mlp_hidden')"
OFFLOAD_DOTS = "offload_dot_with_no_batch_dims('device', 'pinned_host')"
#: The policies measured: each offloading policy next to the policy that keeps the same values on
#: the device, and full remat.
POLICIES: dict[str, Any] = {
    "nothing_saveable": _CP.nothing_saveable,
    "save_only_these_names('mlp_hidden')": _CP.save_only_these_names("mlp_hidden"),
    OFFLOAD_NAMES: _CP.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["mlp_hidden"],
        offload_src="device",
        offload_dst="pinned_host",
    ),
    "dots_with_no_batch_dims_saveable": _CP.dots_with_no_batch_dims_saveable,
    OFFLOAD_DOTS: _CP.offload_dot_with_no_batch_dims("device", "pinned_host"),
}
#: offloading policy -> the policy that keeps the same residuals in device memory
ON_DEVICE = {
    OFFLOAD_NAMES: "save_only_these_names('mlp_hidden')",
    OFFLOAD_DOTS: "dots_with_no_batch_dims_saveable",
}


def memory_kinds(device: Any = None) -> list[str]:
    """The kinds of memory a device can address: ``device.addressable_memories()``."""
    device = jax.devices()[0] if device is None else device
    return [m.kind for m in device.addressable_memories()]


def make_loss(cfg: Config, policy: Any) -> Callable[[Any, Any], jax.Array]:
    layer = jax.checkpoint(lambda h, p: block(h, p, cfg.heads), policy=policy)
    return scan_loss(layer)


# --- what each stage of the program says --------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Transfers:
    """``device_put`` equations between memory spaces in a jaxpr, per call (loops multiplied)."""

    to_host: int  #: equations whose result lives in host memory
    to_host_bytes: int
    to_device: int  #: equations that bring a host value back to device memory
    to_device_bytes: int


def _space(aval: Any) -> str:
    space = getattr(aval, "memory_space", None)
    return getattr(space, "name", str(space))


def _nbytes(aval: Any) -> int:
    return int(math.prod(aval.shape) * aval.dtype.itemsize)


def host_transfers(jaxpr: Any, times: int = 1) -> Transfers:
    """The transfers to host memory and back that a traced program asks for.

    A transfer inside ``lax.scan`` happens once per iteration, so its bytes are multiplied by the
    scan's length (the number of layers, for a scan over layers).
    """
    counts = [0, 0, 0, 0]
    for eqn in open_jaxpr(jaxpr).eqns:
        if eqn.primitive.name == "device_put":
            kinds = eqn.params.get("devices") or [None] * len(eqn.outvars)
            for src, dst, kind in zip(eqn.invars, eqn.outvars, kinds, strict=True):
                src_space, dst_space = _space(src.aval), _space(dst.aval)
                if dst_space == "None" and src_space == "None":
                    # Releases whose values carry no memory space (jax 0.5) name only where a
                    # device_put sends its value: a host kind is a transfer there, "device" one
                    # back (JAX puts a value to "device" only to bring an offloaded one back).
                    kind = str(getattr(kind, "memory_kind", None))
                    dst_space = "Host" if "host" in kind else "None"
                    src_space = "Host" if kind == "device" else "None"
                if dst_space == "Host" and src_space != "Host":
                    counts[0] += times
                    counts[1] += times * _nbytes(dst.aval)
                elif src_space == "Host" and dst_space != "Host":
                    counts[2] += times
                    counts[3] += times * _nbytes(dst.aval)
        inner = times * int(eqn.params.get("length", 1)) if eqn.primitive.name == "scan" else times
        for sub in equation_jaxprs(eqn):
            found = host_transfers(sub, inner)
            counts = [a + b for a, b in zip(counts, dataclasses.astuple(found), strict=True)]
    return Transfers(*counts)


def placement_annotations(lowered_text: str) -> int:
    """``annotate_device_placement`` calls in a lowered program (``jit(f).lower(...).as_text()``):
    how JAX tells XLA that a value belongs in another memory."""
    return len(re.findall(r"annotate_device_placement", lowered_text))


def lowered_for(platform: str, fn: Any, *args: Any) -> str:
    """The program ``jax.jit(fn)`` lowers to for ``platform`` ("cpu", "cuda", "tpu"), as text.

    ``jax.export`` lowers for any platform JAX knows, without that hardware: on a CPU machine it
    shows what a GPU would be given. Older releases (jax 0.5) refuse to export the placement
    annotation (a custom call without a compatibility promise there) unless told to allow it.
    """
    allow = [jax.export.DisabledSafetyCheck.custom_call("annotate_device_placement")]
    exported = jax.export.export(jax.jit(fn), platforms=[platform], disabled_checks=allow)
    return str(exported(*args).mlir_module())


def placements_by_platform(
    cfg: Config, platforms: Sequence[str] = ("cpu", "cuda", "tpu"), policy: str = OFFLOAD_NAMES
) -> dict[str, int]:
    """Placement annotations in the step of ``policy`` lowered for each platform."""
    grad = jax.grad(make_loss(cfg, POLICIES[policy]))
    args = (init_params(cfg), init_inputs(cfg))
    return {p: placement_annotations(lowered_for(p, grad, *args)) for p in platforms}


def placement_lines(lowered_text: str) -> str:
    """The ``annotate_device_placement`` lines of a lowered program, without source locations."""
    lines = [
        re.sub(r"\s+loc\(.*\)$", "", line.strip())
        for line in lowered_text.splitlines()
        if "annotate_device_placement" in line
    ]
    return "\n".join(lines)


def host_buffers(compiled_text: str) -> int:
    """Arrays placed in host memory in a compiled program's text: XLA writes them ``S(5)``."""
    return len(re.findall(r"S\(5\)", compiled_text))


@dataclasses.dataclass(frozen=True)
class Result:
    policy: str
    to_host_bytes: int  #: bytes the traced program sends to host memory per step
    to_device_bytes: int  #: ... and brings back
    annotations: int  #: placement annotations in the lowered program
    host_buffers: int  #: host-memory arrays in the compiled program
    temp_bytes: int  #: XLA's temporary device memory for one step
    host_temp_bytes: int | None  #: XLA's temporary host memory for one step
    flops: float | None
    step: dict[str, Any] | None  #: a :class:`~examples.tools.measure.Timing` as a dict, if timed

    @property
    def timing(self) -> Timing | None:
        return None if self.step is None else Timing(**self.step)


def measure(
    cfg: Config,
    policies: Sequence[str] | None = None,
    repeats: int = MIN_REPEATS,
    time_steps: bool = True,
) -> list[Result]:
    """Trace, lower, compile (and time) one gradient step per policy, on the default device."""
    names = list(POLICIES) if policies is None else list(policies)
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise KeyError(f"unknown policies {unknown}; known: {list(POLICIES)}")
    params, x = init_params(cfg), init_inputs(cfg)
    results = []
    for name in names:
        grad = jax.grad(make_loss(cfg, POLICIES[name]))
        moved = host_transfers(jax.make_jaxpr(grad)(params, x).jaxpr)
        lowered = jax.jit(grad).lower(params, x)
        # compiled as it runs where it is timed next (the run then reads this compile from JAX's
        # persistent cache), else for reading its plan only
        compiled = lowered.compile() if time_steps else compile_for_analysis(lowered)
        stats = stats_of(compiled)
        step = time_call(jax.jit(grad), params, x, repeats=repeats) if time_steps else None
        results.append(
            Result(
                policy=name,
                to_host_bytes=moved.to_host_bytes,
                to_device_bytes=moved.to_device_bytes,
                annotations=placement_annotations(lowered.as_text()),
                host_buffers=host_buffers(hlo_text(compiled)),
                temp_bytes=stats.temp_bytes,
                host_temp_bytes=stats.host_temp_bytes,
                flops=stats.flops,
                step=None if step is None else step.as_dict(),
            )
        )
    return results


def device_memory_saved(results: Sequence[Result]) -> dict[str, int]:
    """For each offloading policy measured with its on-device twin: device temp bytes saved."""
    by_name = {r.policy: r for r in results}
    return {
        off: by_name[dev].temp_bytes - by_name[off].temp_bytes
        for off, dev in ON_DEVICE.items()
        if off in by_name and dev in by_name
    }


def _bytes_or_na(n: int | None) -> str:
    return "n/a" if n is None else format_bytes(n)


def stages_table(results: Sequence[Result]) -> Table:
    """Where each policy's offload shows, stage by stage (no times: for a backend that moves
    nothing)."""
    rows = [
        (
            f"`{r.policy}`",
            format_bytes(r.to_host_bytes),
            r.annotations,
            r.host_buffers,
            format_bytes(r.temp_bytes),
            _bytes_or_na(r.host_temp_bytes),
        )
        for r in results
    ]
    header = ["policy", "jaxpr: to host per step", "lowered: placements"]
    header += ["compiled: host arrays", "temp device memory", "temp host memory"]
    return Table(header, rows)


def results_table(results: Sequence[Result]) -> Table:
    """A recorded run: memory, bytes moved, device memory saved and step time per policy."""
    saved = device_memory_saved(results)
    rows = []
    for r in results:
        moved = r.to_host_bytes + r.to_device_bytes
        rows.append(
            (
                f"`{r.policy}`",
                format_bytes(r.temp_bytes),
                _bytes_or_na(r.host_temp_bytes),
                format_bytes(moved) if moved else "0",
                r.host_buffers,
                format_bytes(saved[r.policy]) if r.policy in saved else "",
                str(r.timing) if r.timing else "not timed",
            )
        )
    header = ["policy", "device temp memory", "host temp memory", "asked to move per step"]
    header += ["compiled: host arrays", "device memory saved", "step time"]
    return Table(header, rows)


# --- recorded runs as data ----------------------------------------------------------------------


class OffloadDataError(recorded.RecordError):
    """A file that is not what ``python -m examples.howto.offload`` writes."""


@dataclasses.dataclass(frozen=True)
class Run:
    runinfo: dict[str, Any]
    config: Config
    results: list[Result]

    def label(self) -> str:
        return recorded.label(self.runinfo)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "runinfo": self.runinfo,
            "config": dataclasses.asdict(self.config),
            "results": [dataclasses.asdict(r) for r in self.results],
        }


def save(run: Run, path: str | Path) -> None:
    """Write ``run`` as JSON; an existing file is never replaced (``FileExistsError``)."""
    recorded.write_new(path, run.to_json())


def load(path: str | Path) -> Run:
    """Read a recorded run, checking its shape; errors name the file and what is wrong."""
    name = Path(path).name
    data, _ = recorded.read(path, {SCHEMA: 1}, OffloadDataError, fields={"results": list})
    results = [
        recorded.build(Result, r, f"{name}: results[{i}]", OffloadDataError)
        for i, r in enumerate(data["results"])
    ]
    for r in results:
        if r.step is not None:
            recorded.build(Timing, r.step, f"{name}: {r.policy}: step", OffloadDataError)
    config = recorded.build(Config, data.get("config"), f"{name}: config", OffloadDataError)
    return Run(data["runinfo"], config, results)


def load_all(folder: str | Path = RUNS) -> list[Run]:
    """Every recorded run under ``folder`` (by default the committed ones), in name order."""
    return recorded.load_all(folder, load)


COMMAND = (
    "PYTHONPATH=src python -m examples.howto.offload --out src/examples/data/offload/MY-GPU.json"
)
NOX_COMMAND = "nox -s offload-record -- --out src/examples/data/offload/MY-GPU.json"


class Markdown:
    """Text a page renders as Markdown (a cell's value)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


def accelerator_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs recorded on an accelerator: a CPU run shows nothing about offload."""
    return [r for r in runs if r.runinfo.get("backend") != "cpu"]


def status(runs: Sequence[Run]) -> str:
    """One sentence: what the committed runs are, or that there is none."""
    shown = accelerator_runs(runs)
    if not shown:
        return "no GPU run is committed yet"
    return "recorded on " + "; ".join(r.label() for r in shown)


def gpu_report(runs: Sequence[Run]) -> Markdown:
    """Each committed accelerator run as a table, or how to record one where there is none."""
    shown = accelerator_runs(runs)
    if not shown:
        return Markdown(
            "No GPU run is committed yet: `src/examples/data/offload/` holds no recorded file, and "
            "this "
            "page shows no figure it did not measure. On any machine with a GPU, from the "
            f"repository root:\n\n```bash\n{COMMAND}\n```\n\nor, in an environment where "
            f"nox is installed beside JAX's CUDA build:\n\n```bash\n{NOX_COMMAND}\n```\n\n"
            "then commit the file; the next build renders it here."
        )
    parts = []
    for run in shown:
        cfg = run.config
        parts.append(
            f"**{run.label()}**, {cfg.layers} layers, batch {cfg.batch}, sequence {cfg.seq}, "
            f"width {cfg.width}:\n\n{results_table(run.results).to_markdown()}"
        )
    return Markdown("\n\n".join(parts))


def record(cfg: Config, repeats: int = 10) -> Run:
    """Measure every policy on the default device, with the device, backend and versions."""
    return Run(collect().as_dict(), cfg, measure(cfg, repeats=repeats))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.howto.offload",
        description="Record what host offload of residuals does on this machine's accelerator.",
    )
    parser.add_argument("--out", type=Path, required=True, help="a new JSON file")
    parser.add_argument("--size", choices=sorted(SIZES), default="medium")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per policy")
    parser.add_argument(
        "--allow-cpu",
        action="store_true",
        help="record on a CPU too (the CPU backend moves nothing: for testing the recorder)",
    )
    ns = parser.parse_args(argv)
    if ns.out.exists():
        print(f"{ns.out} exists; not overwriting it (remove it first)", file=sys.stderr)
        return 2
    if ns.repeats < MIN_REPEATS:
        parser.error(f"--repeats must be at least {MIN_REPEATS}")
    backend = jax.default_backend()
    if backend == "cpu" and not ns.allow_cpu:
        print(
            "JAX runs on the CPU here, whose compiled programs ignore host offload; run this on "
            "a GPU (or TPU) machine, or pass --allow-cpu to record anyway",
            file=sys.stderr,
        )
        return 3
    run = record(SIZES[ns.size], ns.repeats)
    print(f"# {run.label()}  {run.config}")
    print(repr(results_table(run.results)))
    save(run, ns.out)
    print(f"wrote {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
