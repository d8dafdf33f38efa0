"""How-to: measure memory on your own hardware.

The code of ``docs/howto/measure-memory.md``, in the order of the page: what the compiler plans
for a training step (``memory_analysis()``), sizing a model that does not fit from shapes alone,
what the device reports it used (``Device.memory_stats()``), a device memory profile (read with a
small decoder of the pprof format, so that the page can show what the file holds), the residuals
a whole model keeps, and an out-of-memory error.

Everything here runs on any backend; where a backend reports nothing (the CPU has no device
memory statistics), the functions return ``None`` and the page says so.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import os
import re
import tempfile
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools import measure
from examples.tools.display import Table, format_bytes
from examples.tools.residuals import relative_source

# --- what the compiler plans ---------------------------------------------------------------------

#: The fields of ``memory_analysis()`` the page explains, in the order it explains them.
FIELDS = (
    ("argument_size_in_bytes", "the step's inputs: parameters, optimizer state, the batch"),
    ("output_size_in_bytes", "what it returns: the new parameters and optimizer state, the loss"),
    ("alias_size_in_bytes", "outputs written over donated inputs (counted once)"),
    ("temp_size_in_bytes", "temporaries: activations, residuals, gradients being built"),
    ("generated_code_size_in_bytes", "the compiled code itself"),
    ("host_temp_size_in_bytes", "temporaries in host memory (offloaded residuals)"),
    ("peak_memory_in_bytes", "XLA's own peak estimate, where the backend computes one"),
)


def memory_table(analysis: Any) -> Table:
    """The fields of one ``CompiledMemoryStats``, with what each counts."""
    rows = []
    for name, meaning in FIELDS:
        value = getattr(analysis, name, None)
        shown = "not reported" if value is None else format_bytes(value)
        rows.append([f"`{name}`", shown, meaning])
    return Table(["field", "value", "what it counts"], rows, align=["left", "right", "left"])


def planned_total(analysis: Any) -> int:
    """Arguments, outputs and temporaries, outputs aliased to inputs counted once."""
    return int(
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
        + analysis.temp_size_in_bytes
    )


# --- what the device reports ---------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DeviceMemory:
    """What ``device.memory_stats()`` says, or ``None`` for each figure the backend leaves out."""

    platform: str
    in_use: int | None
    peak: int | None
    limit: int | None
    reported: bool  #: whether the backend returned any statistics at all


def device_memory(device: Any = None) -> DeviceMemory:
    """Read ``memory_stats()`` of ``device`` (the first device by default)."""
    device = device or jax.devices()[0]
    stats = device.memory_stats()
    if not stats:
        return DeviceMemory(device.platform, None, None, None, reported=False)
    return DeviceMemory(
        device.platform,
        stats.get("bytes_in_use"),
        stats.get("peak_bytes_in_use"),
        stats.get("bytes_limit"),
        reported=True,
    )


def fits(analysis: Any, memory: DeviceMemory) -> bool | None:
    """Whether the planned total fits under the device's limit; ``None`` where there is none."""
    if memory.limit is None:
        return None
    return planned_total(analysis) <= memory.limit


# --- a device memory profile ---------------------------------------------------------------------
#
# ``jax.profiler.device_memory_profile()`` returns a gzipped protocol buffer in pprof's format
# (github.com/google/pprof, proto/profile.proto). pprof reads it; to show on the page what it holds,
# the few fields needed are decoded here: sample types, samples (values, labels, stack), locations,
# functions and the string table.


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, i


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of each field of one protobuf message."""
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = data[i : i + size], i + size
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} in a pprof profile")
        yield number, value


def _int(value: int | bytes) -> int:
    if not isinstance(value, int):
        raise ValueError("a pprof profile field that should be an integer holds bytes")
    return value


def _bytes(value: int | bytes) -> bytes:
    if isinstance(value, int):
        raise ValueError("a pprof profile field that should hold bytes is an integer")
    return value


def _message(value: int | bytes) -> dict[int, int | bytes]:
    """The fields of an embedded message, the last value of each field number."""
    return dict(_fields(_bytes(value)))


def _ints(value: int | bytes) -> list[int]:
    """A repeated integer field: packed (bytes) or one value."""
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        item, i = _varint(value, i)
        out.append(item)
    return out


@dataclasses.dataclass(frozen=True)
class Sample:
    count: int
    nbytes: int
    labels: dict[str, str]
    stack: tuple[tuple[str, str, int], ...]  #: (function, file, line), innermost first


@dataclasses.dataclass(frozen=True)
class Profile:
    sample_types: tuple[tuple[str, str], ...]  #: (type, unit) of each value of a sample
    samples: tuple[Sample, ...]

    def of_kind(self, kind: str) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.labels.get("kind") == kind)


def read_profile(raw: bytes) -> Profile:
    """Decode a device memory profile (gzipped or not) as JAX writes it."""
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    top = list(_fields(data))
    strings = [_bytes(v).decode() for n, v in top if n == 6]
    functions: dict[int, tuple[str, str]] = {}
    locations: dict[int, tuple[int, int]] = {}
    for number, value in top:
        if number == 5:  # Function: id, name, system_name, filename
            f = _message(value)
            functions[_int(f.get(1, 0))] = (strings[_int(f.get(2, 0))], strings[_int(f.get(4, 0))])
        elif number == 4:  # Location: id, ..., line (function_id, line)
            loc = _message(value)
            line = _message(loc[4]) if 4 in loc else {}
            locations[_int(loc.get(1, 0))] = (_int(line.get(1, 0)), _int(line.get(2, 0)))
    sample_types: list[tuple[str, str]] = []
    samples: list[Sample] = []
    for number, value in top:
        if number == 1:
            t = _message(value)
            sample_types.append((strings[_int(t.get(1, 0))], strings[_int(t.get(2, 0))]))
        elif number == 2:
            ids: list[int] = []
            values: list[int] = []
            labels: dict[str, str] = {}
            for n, v in _fields(_bytes(value)):
                if n == 1:
                    ids += _ints(v)
                elif n == 2:
                    values += _ints(v)
                elif n == 3:
                    label = _message(v)
                    labels[strings[_int(label.get(1, 0))]] = strings[_int(label.get(2, 0))]
            stack: list[tuple[str, str, int]] = []
            for location in ids:
                function_id, line_number = locations.get(location, (0, 0))
                name, file = functions.get(function_id, ("?", "?"))
                stack.append((name, file, line_number))
            samples.append(Sample(values[0], values[1], labels, tuple(stack)))
    return Profile(tuple(sample_types), tuple(samples))


_JAX_OWN = re.compile(r"[/\\](jax|jaxlib)[/\\]")


def allocation_site(sample: Sample) -> str:
    """The innermost frame outside JAX itself, as ``file:line (function)`` without folders."""
    for name, file, line in sample.stack:
        if not _JAX_OWN.search(file):
            return relative_source(f"{file}:{line} ({name})")
    return "inside JAX"


def profile_table(profile: Profile, top: int = 8) -> Table:
    """Live buffers grouped by where they were allocated, largest first."""
    sites: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()
    for sample in profile.of_kind("buffer"):
        site = allocation_site(sample)
        sites[site] += sample.nbytes
        counts[site] += sample.count
    rows = [[f"`{site}`", counts[site], format_bytes(n)] for site, n in sites.most_common(top)]
    return Table(["allocated at", "buffers", "bytes"], rows)


# --- an out-of-memory error ----------------------------------------------------------------------


def too_big(x: jax.Array) -> jax.Array:
    """A function that needs at least one ``len(x)`` × ``len(x)`` array of floats, 256 TiB for
    ``len(x)`` = 2**23, more than any machine has. How much XLA plans in all, and in how many
    pieces, is read from the compiled program (:func:`buffer_assignment`), not assumed."""
    table = jnp.outer(x, x)
    return jnp.cumsum(table, axis=0)[-1].sum()


#: The input of :func:`too_big`: 32 MiB of float32, harmless on its own.
TOO_BIG_LENGTH = 2**23

#: The status code in front of it varies by release (``RESOURCE_EXHAUSTED`` on recent ones,
#: ``INTERNAL`` or ``FAILED_PRECONDITION`` with a "Buffer Definition Event" prefix on older ones),
#: so only the sentence with the number is read.
_OOM = re.compile(r"Out of memory (?:while trying to )?(?:allocate|allocating) (\d+) bytes")


def oom_bytes(message: str) -> int | None:
    """The size XLA failed to allocate, read from its out-of-memory message."""
    match = _OOM.search(message)
    return None if match is None else int(match.group(1))


# --- XLA's buffer assignment ----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Value:
    name: str  #: the HLO instruction that produces it
    nbytes: int
    offset: int  #: where it sits inside its allocation
    shape: str


@dataclasses.dataclass(frozen=True)
class Allocation:
    """One allocation of XLA's buffer assignment: a block of memory and the values placed in it."""

    number: int
    nbytes: int
    kinds: str  #: what XLA says it holds: "parameter 0", "preallocated-temp", ...
    values: tuple[Value, ...]


_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+),(.*):$")
_VALUE = re.compile(r"^ value: <\d+ (\S+) @\d+> \(size=(\d+),offset=(\d+)\): (\S+)")


def read_buffer_assignment(text: str) -> tuple[Allocation, ...]:
    """The allocations of a ``*buffer-assignment.txt`` file that XLA dumps, largest first."""
    found: list[Allocation] = []
    for line in text.splitlines():
        head = _ALLOCATION.match(line)
        if head:
            number, size, kinds = head.groups()
            found.append(Allocation(int(number), int(size), kinds.strip(" ,"), ()))
            continue
        value = _VALUE.match(line)
        if value and found:
            name, size, offset, shape = value.groups()
            last = found[-1]
            item = Value(name, int(size), int(offset), shape)
            found[-1] = dataclasses.replace(last, values=(*last.values, item))
    return tuple(sorted(found, key=lambda a: -a.nbytes))


def buffer_assignment(fn: Any, *args: Any) -> tuple[list[str], str]:
    """Compile ``jax.jit(fn)`` for ``args`` with XLA's dump turned on, into a temporary folder.

    Returns the names of the files XLA wrote (relative to the folder) and the text of its buffer
    assignment (the file ending ``buffer-assignment.txt``). Outside a running program, the same
    dump comes from ``XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text"`` set before JAX starts;
    here the two options are passed to this one compilation, as ``compiler_options``.
    """
    with tempfile.TemporaryDirectory() as folder:
        options = {"xla_dump_to": folder, "xla_dump_hlo_as_text": True}
        with measure.persistent_cache_off():  # a program read from the cache is not dumped
            jax.jit(fn).lower(*args).compile(compiler_options=options)
        names = sorted(os.listdir(folder))
        chosen = [n for n in names if n.endswith("buffer-assignment.txt")]
        if not chosen:
            raise RuntimeError(f"XLA wrote no buffer assignment; it wrote {names}")
        with open(os.path.join(folder, chosen[-1])) as file:
            return names, file.read()
