"""What the problem pages measure the same way: the gradient's compiled cost, as a table."""

from __future__ import annotations

from collections.abc import Mapping

from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.measure import CompiledStats


def costs_table(costs: Mapping[str, CompiledStats], label: str = "variant") -> Table:
    """Temp memory and FLOPs of each compiled gradient, both against the first row's."""
    base = next(iter(costs.values()))
    return Table(
        (label, "XLA temp memory", "memory vs first", "FLOPs vs first"),
        [
            (
                name,
                format_bytes(s.temp_bytes),
                format_ratio(s.temp_bytes, base.temp_bytes),
                format_ratio(s.flops, base.flops),
            )
            for name, s in costs.items()
        ],
    )
