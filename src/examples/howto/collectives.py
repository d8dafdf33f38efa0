"""The collectives of a compiled sharded program, read from its HLO text.

``jax.jit(f).lower(*args).compile().as_text()`` is the program one device runs, after XLA's
SPMD partitioner has turned shardings into communication. Each ``all-gather``, ``all-reduce``,
``reduce-scatter``, ... in it is written once, though one inside the loop of a scan over layers
runs once per layer: :func:`collectives` finds the trip counts XLA records on its loops and
multiplies them out, so byte totals are per step. Whether a collective belongs to the forward or
the backward pass is read from the name JAX gives the operation it came from (the backward
pass's names start with ``transpose(``).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from collections.abc import Sequence

import jax

from examples.tools.display import Table, format_bytes

OPS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
_COMPUTATION = re.compile(r"^(?:ENTRY )?%(?P<name>[^\s(]+) \(.*\{\s*$")
_INSTRUCTION = re.compile(
    r"^\s*(?:ROOT )?%\S+ = (?P<shape>.+?) (?P<op>" + "|".join(OPS) + r")(?P<start>-start)?\("
)
_ARRAY = re.compile(r"\b(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]")
_CALLS = re.compile(r"\b(?P<kind>calls|to_apply|body|condition)=%(?P<name>[^\s,)]+)")
_TRIPS = re.compile(r'"known_trip_count":\{"n":"(?P<n>\d+)"\}')
_LAYOUT = re.compile(r"\{[^}]*\}")
_OP_NAME = re.compile(r'op_name="(?P<name>[^"]*)"')
_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2}
_ITEMSIZE |= {"f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8}


@dataclasses.dataclass(frozen=True)
class Collective:
    """One collective operation of a compiled program, on one device."""

    op: str  #: "all-gather", "all-reduce", "reduce-scatter", ...
    shape: str  #: its result as XLA writes it, e.g. "f32[256,768]{1,0}"
    nbytes: int  #: bytes of its result on one device, each time it runs
    runs: int  #: times it runs per call: the trip counts of the loops around it
    op_name: str  #: the JAX operation it came from ("" where XLA kept no name)

    @property
    def backward(self) -> bool:
        """Made by the backward pass: JAX names its operations ``transpose(...)``."""
        return "transpose(" in self.op_name

    @property
    def bytes_per_step(self) -> int:
        return self.nbytes * self.runs


def _array_bytes(shape: str, last_only: bool) -> int:
    arrays = [
        _ITEMSIZE.get(m["dtype"], 4) * math.prod(int(d) for d in m["dims"].split(",") if d)
        for m in _ARRAY.finditer(shape)
    ]
    if not arrays:
        return 0
    return arrays[-1] if last_only else sum(arrays)


def hlo_text(compiled: jax.stages.Compiled) -> str:
    """``compiled.as_text()``, or a clear error where the backend gives no text (``None``)."""
    text = compiled.as_text()
    if text is None:
        raise RuntimeError(
            f"the {jax.default_backend()} backend gives no text for this compiled program "
            "(Compiled.as_text() returned None)"
        )
    return text


def collectives(hlo: str) -> list[Collective]:
    """Every collective in the text of a compiled program (``compiled.as_text()``)."""
    parent: dict[str, tuple[str, int]] = {}
    found: list[tuple[str, Collective]] = []
    current = ""
    for line in hlo.splitlines():
        header = _COMPUTATION.match(line)
        if header:
            current = header["name"]
            continue
        trips = _TRIPS.search(line)
        for call in _CALLS.finditer(line):
            times = int(trips["n"]) if trips and call["kind"] in ("body", "condition") else 1
            parent.setdefault(call["name"], (current, times))
        op = _INSTRUCTION.match(line)
        if op:
            name = _OP_NAME.search(line)
            # An async collective's result lists its operand first: count the result only.
            nbytes = _array_bytes(op["shape"], last_only=bool(op["start"]))
            item = Collective(op["op"], op["shape"], nbytes, 1, name["name"] if name else "")
            found.append((current, item))

    def runs(computation: str, seen: frozenset[str] = frozenset()) -> int:
        if computation not in parent or computation in seen:
            return 1
        up, times = parent[computation]
        return times * runs(up, seen | {computation})

    return [dataclasses.replace(c, runs=runs(comp)) for comp, c in found]


def counts(found: Sequence[Collective]) -> collections.Counter[str]:
    """Operations per kind, as written in the program."""
    return collections.Counter(c.op for c in found)


def table(found: Sequence[Collective]) -> Table:
    """One row per collective: what it makes, how often it runs, where it came from."""
    rows = [
        (
            c.op,
            "backward" if c.backward else "forward",
            f"`{_LAYOUT.sub('', c.shape)}`",
            format_bytes(c.nbytes),
            c.runs,
            f"`{c.op_name}`",
        )
        for c in found
    ]
    header = ("operation", "pass", "result per device", "bytes", "runs per step", "JAX operation")
    return Table(header, rows, align=["left", "left", "left", "right", "right", "left"])
