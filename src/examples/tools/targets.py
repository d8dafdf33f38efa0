"""The accelerators a step can be compiled for without owning one: GPUs and TPUs as compile-only
devices, and this machine's CPU.

JAX compiles for hardware it does not have: :func:`jax.experimental.topologies.get_topology_desc`
returns *compile-only* devices for a TPU slice (with ``libtpu`` installed) or for NVIDIA GPUs
(with JAX's CUDA plugin installed and a ``GpuTargetConfig`` text proto describing the GPU). A
program lowered with shardings on those devices and compiled runs the target's own XLA compiler,
and the executable's ``memory_analysis()`` and ``cost_analysis()`` are that compiler's plan.
Nothing is allocated and no device or network is needed. :mod:`examples.tools.plans` compiles a
step for these targets; this module says what the targets are and finds their devices.

Usage::

    from examples.tools.targets import TARGETS, target, devices

    t = target("h100-80gb x8")       # a Target: platform "cuda", 8 devices, 79.1 GiB each
    devs = devices(t)                # 8 compile-only H100 devices (needs jax[cuda13])
    sorted(TARGETS)                  # every known name

Errors a reader can cause: :class:`UnknownTarget` (a name not in :data:`TARGETS`: the message lists
the known ones) and :class:`CompilerMissing` (the compiler for that platform is not installed:
the message names the package that brings it, ``pip install "jax[tpu]==<installed jax>"`` or
``pip install "jax[cuda13]==<installed jax>"``).

Where each device's memory comes from (:attr:`Target.memory_source`):

- GPUs: the spec's ``device_memory_size``. The specs are XLA's own
  (``xla/tools/hlo_opt/gpu_specs``), committed unchanged under ``src/examples/data/targets/``
  with a README naming their source commit.
- TPUs: the chip's HBM as Google's Cloud TPU documentation gives it (v5e 16, v6e 32, v5p 95 "GB"
  per chip), read as binary units, as the TPU compiler's own figures are (it reports 15.75G
  usable on a v5e). The compile-only devices report no memory; the TPU compiler itself refuses a
  plan over the HBM it can use (a little less than the chip's), and its error gives that figure
  (:class:`OutOfMemory`); a plan it does return is compared with this table's figure.
- CPU: this machine's physical memory (``sysconf``).

Why the compilers are not in the docs environment (measured 2026-11-28 on the project's 2-core
machine, jax 0.12.0.1, uv from a warm index): ``jax[tpu]`` adds ``libtpu`` 0.0.50.1, about
0.6 GB installed, 11 s; ``jax[cuda13]`` adds the CUDA plugin with NVIDIA's CUDA 13 libraries,
about 3.8 GB installed, 56 s (the test environment itself is 0.9 GB). Both exist for Linux only,
and each TPU compile takes 10-30 s on this machine. So ``nox -s plans`` installs them beside the
test environment, compiles, and writes JSON records under ``src/examples/data/plans/`` that the
pages render; ``nox -s docs`` reads the records and builds without either compiler.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import platform
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax

#: The committed GPU specs (``GpuTargetConfig`` text protos; see the README beside them).
SPECS = Path(__file__).resolve().parents[1] / "data" / "targets"

GiB = 1024**3


class UnknownTarget(KeyError):
    """A target name that is not one of :data:`TARGETS`."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


class CompilerMissing(RuntimeError):
    """The compiler for a target's platform is not installed here."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One hardware target: what to compile for, and the memory each device has."""

    name: str  #: e.g. ``"h100-80gb x8"``, ``"tpu-v5e:2x2"``, ``"cpu"``
    platform: str  #: ``"cpu"``, ``"cuda"`` or ``"tpu"``
    device_count: int
    memory_bytes: int  #: one device's memory
    memory_source: str  #: where ``memory_bytes`` comes from
    device_kind: str  #: what the compile-only devices call themselves
    topology: str = ""  #: ``"v5e:2x2"`` for a TPU, ``"1x1x8"`` for GPUs
    spec: str = ""  #: the GPU spec's file name under ``data/targets/``
    #: the share of ``memory_bytes`` a plan may use (:attr:`budget_bytes`); see :data:`BUDGETS`
    budget_fraction: float = 1.0
    budget_source: str = "the device's memory"

    @property
    def budget_bytes(self) -> int:
        """The memory a plan is judged against: the compiler's own limit where it has one."""
        return int(self.memory_bytes * self.budget_fraction)

    @property
    def spec_text(self) -> str:
        """The GPU spec (a ``GpuTargetConfig`` text proto); ``""`` for other platforms."""
        return (SPECS / self.spec).read_text(encoding="utf-8") if self.spec else ""

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "budget_bytes": self.budget_bytes}


def _spec_memory(spec: str) -> int:
    found = re.search(r"device_memory_size:\s*(\d+)", (SPECS / spec).read_text(encoding="utf-8"))
    if not found:
        raise ValueError(f"{spec} gives no device_memory_size")
    return int(found.group(1))


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not on every OS
        return 0


_TPU_DOCS = "Google Cloud TPU documentation: HBM per chip"
#: TPU generations: the name in a topology, the device kind, the chip's HBM.
_TPUS = {
    "v5e": ("TPU v5 lite", 16 * GiB),
    "v6e": ("TPU v6 lite", 32 * GiB),
    "v5p": ("TPU v5", 95 * GiB),
}
#: The budget a plan is judged against, per platform (and TPU generation): the share of device
#: memory the target's compiler itself aims at. XLA's GPU compiler takes 80% of
#: ``device_memory_size`` as its base limit (its scheduler logs "exceeds the base limit
#: (67982747238)" for an H100's 84,978,434,048 bytes); the TPU compiler refuses a plan whose
#: peak exceeds its "available HBM", which its out-of-memory message gives (15.75G of a v5e's
#: 16 GiB, 31.24G of a v6e's 32 GiB; for the v5p the same 256 MiB held back is assumed).
BUDGETS: dict[str, tuple[float, str]] = {
    "cuda": (0.8, "XLA's GPU compiler's base limit: 80% of device memory"),
    "v5e": (15.75 / 16, "the TPU compiler's available HBM (its out-of-memory message)"),
    "v6e": (31.24 / 32, "the TPU compiler's available HBM (its out-of-memory message)"),
    "v5p": (94.75 / 95, "the chip's HBM less 256 MiB, as the v5e's compiler holds back"),
}
#: GPUs: the name, the spec file, the device kind the spec gives.
_GPUS = {
    "h100-80gb": ("h100_sxm.txtpb", "NVIDIA H100 80GB HBM3"),
    "a100-80gb": ("a100_sxm_80.txtpb", "NVIDIA A100-SXM4-80GB"),
}


def _tpu(generation: str, shape: str) -> Target:
    kind, memory = _TPUS[generation]
    count = 1
    for n in shape.split("x"):
        count *= int(n)
    return Target(
        name=f"tpu-{generation}:{shape}",
        platform="tpu",
        device_count=count,
        memory_bytes=memory,
        memory_source=_TPU_DOCS,
        device_kind=kind,
        topology=f"{generation}:{shape}",
        budget_fraction=BUDGETS[generation][0],
        budget_source=BUDGETS[generation][1],
    )


def _gpu(name: str, count: int) -> Target:
    spec, kind = _GPUS[name]
    return Target(
        name=name if count == 1 else f"{name} x{count}",
        platform="cuda",
        device_count=count,
        memory_bytes=_spec_memory(spec),
        memory_source=f"device_memory_size of {spec} (XLA's GPU spec)",
        device_kind=kind,
        topology=f"1x1x{count}",
        spec=spec,
        budget_fraction=BUDGETS["cuda"][0],
        budget_source=BUDGETS["cuda"][1],
    )


def _known() -> dict[str, Target]:
    targets = [
        Target(
            name="cpu",
            platform="cpu",
            device_count=1,
            memory_bytes=_host_memory(),
            memory_source="this machine's physical memory",
            device_kind="cpu",
        ),
        *(_gpu(name, count) for name in _GPUS for count in (1, 8)),
        _tpu("v5e", "1x1"),
        _tpu("v5e", "2x2"),
        _tpu("v6e", "2x2"),
        _tpu("v5e", "4x4"),
        _tpu("v5p", "2x2x1"),
    ]
    return {t.name: t for t in targets}


#: Every known target by name.
TARGETS: dict[str, Target] = _known()
#: Other spellings accepted by :func:`target`.
ALIASES = {
    "tpu-v5e": "tpu-v5e:1x1",
    "tpu-v5e x4": "tpu-v5e:2x2",
    "tpu-v5e x16": "tpu-v5e:4x4",
    "tpu-v6e x4": "tpu-v6e:2x2",
    "tpu-v5p x4": "tpu-v5p:2x2x1",
}


def target(name: str | Target) -> Target:
    """The :class:`Target` of this name (a Target is returned as it is)."""
    if isinstance(name, Target):
        return name
    found = TARGETS.get(ALIASES.get(name, name))
    if found is None:
        known = ", ".join(repr(n) for n in TARGETS)
        also = ", ".join(f"{a!r} ({n})" for a, n in ALIASES.items())
        raise UnknownTarget(
            f"no target named {name!r}; the known targets are {known}; also accepted: {also}"
        )
    return found


#: Each platform's compiler: the distribution that brings it, the module that proves it is
#: there, and the extra of ``jax`` that installs it.
_COMPILERS = {
    "tpu": ("libtpu", "libtpu", "tpu"),
    "cuda": ("jax-cuda13-plugin", "jax_cuda13_plugin", "cuda13"),
}


def installed_compilers() -> dict[str, str]:
    """The accelerator compilers installed here, and their versions: ``{"libtpu": "0.0.50.1"}``."""
    found = {}
    for distribution, module, _ in _COMPILERS.values():
        if importlib.util.find_spec(module) is not None:
            try:
                found[distribution] = importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                found[distribution] = "unknown"
    return found


def compiler_available(t: str | Target) -> bool:
    """Whether the compiler ``t`` needs is installed (the CPU's always is)."""
    t = target(t)
    return t.platform == "cpu" or importlib.util.find_spec(_COMPILERS[t.platform][1]) is not None


def missing_compiler_message(t: Target) -> str:
    distribution, _, extra = _COMPILERS[t.platform]
    return (
        f"compiling for {t.name!r} needs XLA's {t.platform.upper()} compiler, which comes with "
        f"the package {distribution!r}; it is not installed here. Install it with "
        f'`pip install "jax[{extra}]=={jax.__version__}"` (Linux x86_64 only; no '
        f"{'TPU' if t.platform == 'tpu' else 'GPU'} is needed to compile), or run "
        "`nox -s plans`, which does"
    )


def devices(t: str | Target) -> list[Any]:
    """The devices to compile for ``t`` on: compile-only devices for a GPU or TPU target, this
    process's first CPU device for ``"cpu"``. Raises :class:`CompilerMissing` where the target's
    compiler is not installed. Needs no device and no network."""
    t = target(t)
    if t.platform == "cpu":
        return list(jax.devices("cpu")[: t.device_count])
    if not compiler_available(t):
        raise CompilerMissing(missing_compiler_message(t))
    return list(_topology_devices(t))


@functools.cache
def _topology_devices(t: Target) -> tuple[Any, ...]:
    from jax.experimental import topologies

    try:
        if t.platform == "tpu":
            topology = topologies.get_topology_desc(topology_name=t.topology, platform="tpu")
        else:
            topology = topologies.get_topology_desc(
                platform="cuda", topology=t.topology, target_config=t.spec_text
            )
    except Exception as error:
        raise CompilerMissing(
            f"{missing_compiler_message(t)}. (The package is installed, but asking it for the "
            f"topology failed: {error})"
        ) from error
    found = tuple(topology.devices)
    if len(found) != t.device_count:
        raise RuntimeError(f"{t.name}: expected {t.device_count} devices, found {len(found)}")
    return found


# --- what the compilers say ---------------------------------------------------------------------

COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
_COLLECTIVE = re.compile(r"\s(" + "|".join(COLLECTIVES) + r")(?:-start)?\(")
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


@dataclasses.dataclass(frozen=True)
class OutOfMemory:
    """The compiler's refusal of a plan over the device's memory, verbatim, with its figures.

    The TPU compiler writes sizes such as ``18.94G``; they are read as binary units (GiB), the
    unit its ``available HBM (15.75G)`` of a 16 GiB v5e chip implies.
    """

    message: str
    required_bytes: int | None
    available_bytes: int | None

    @classmethod
    def parse(cls, message: str) -> OutOfMemory | None:
        """The error in ``message``, or None if it is not a compiler out-of-memory error."""
        if "RESOURCE_EXHAUSTED" not in message or not re.search(
            r"HbmOom|[Oo]ut of memory|exceeds available", message
        ):
            return None
        required = re.search(r"required[^(]*\(([\d.]+)([KMGT]?)\)", message)
        available = re.search(r"available[^(]*\(([\d.]+)([KMGT]?)\)", message)
        return cls(message, _size(required), _size(available))


def _size(found: re.Match[str] | None) -> int | None:
    return None if found is None else round(float(found.group(1)) * _UNITS[found.group(2)])


@contextlib.contextmanager
def xla_log(lines: list[str]) -> Iterator[None]:
    """Copy what XLA writes to the process's standard error meanwhile into ``lines`` (its
    warning and error lines, as ``W... file.cc:123] message``), and still write it there."""
    fd = 2  # XLA writes to the process's file descriptor 2, whatever sys.stderr is
    try:
        sys.stderr.flush()
        saved = os.dup(fd)
    except OSError:  # no descriptor 2 at all
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            if text:
                os.write(fd, text.encode())
            lines += [ln[:2000] for ln in text.splitlines() if re.match(r"[WEF]\d{4} ", ln)][:40]


def count_collectives(hlo_text: str) -> dict[str, int]:
    """How many of each collective the (compiled) HLO text holds; zero counts left out."""
    counts: dict[str, int] = {}
    for found in _COLLECTIVE.finditer(hlo_text):
        counts[found.group(1)] = counts.get(found.group(1), 0) + 1
    return counts


def machine() -> dict[str, Any]:
    """Where plans are compiled: the machine and every version a plan depends on."""
    from examples.tools.runinfo import collect, cpu_model

    info = collect()
    cpu = cpu_model(platform.processor() or "unknown CPU")
    return {
        "device": f"compile-only ({platform.machine()}, {cpu})",
        "backend": info.backend,
        "jax": info.jax,
        "jaxlib": info.jaxlib,
        "python": info.python,
        "compilers": installed_compilers(),
        "gpu_specs": {n: t.spec for n, t in TARGETS.items() if t.spec},
    }
