"""The explorer's results as data: what one run measured, its JSON schema, save and load.

A run made on another machine (a GPU, say) is committed under ``src/examples/data/explorer/``
(:data:`RUNS`; see :mod:`examples.tools.recorded`) and shown on the page beside the page's own run.
Two schema versions exist:

- ``jax-remat-guide/explorer/1`` recorded each step time as a median alone;
- ``jax-remat-guide/explorer/2`` adds the fastest and slowest timed call and their number, so
  that a page can tell a difference from noise.

:func:`load` reads both; a version-1 run says so (:attr:`Result.spread_recorded` is false) and the
page then claims no ordering from its times. Nothing here needs JAX.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from examples.tools import recorded
from examples.tools.measure import Timing
from examples.tools.models import Config

#: Where runs of other machines are committed (they ship with the package).
RUNS = recorded.folder("explorer")

SCHEMA_V1 = "jax-remat-guide/explorer/1"
SCHEMA = "jax-remat-guide/explorer/2"
#: Schema name -> version, for every schema :func:`load` reads.
SCHEMAS = {SCHEMA_V1: 1, SCHEMA: 2}
#: The fields version 2 added to a result (a version-1 file lacks them).
SPREAD_FIELDS = ("step_time_min_s", "step_time_max_s", "step_time_repeats")


@dataclasses.dataclass(frozen=True)
class Result:
    """One policy on one model: JAX's residuals, XLA's memory and FLOPs, and the step time."""

    policy: str
    residual_bytes_per_layer: int  #: computed by one block and kept (its input excluded)
    temp_bytes: int  #: XLA's temporary memory for one gradient of the whole stack
    argument_bytes: int
    host_temp_bytes: int | None
    flops: float | None
    step_time_s: float | None  #: the median of the timed calls
    step_time_min_s: float | None = None
    step_time_max_s: float | None = None
    step_time_repeats: int | None = None

    @property
    def spread_recorded(self) -> bool:
        return self.step_time_min_s is not None and self.step_time_max_s is not None

    @property
    def timing(self) -> Timing | None:
        """The step time as a :class:`~examples.tools.measure.Timing`; ``None`` without a spread."""
        median, low, high = self.step_time_s, self.step_time_min_s, self.step_time_max_s
        repeats = self.step_time_repeats
        if median is None or low is None or high is None or repeats is None:
            return None
        return Timing(median, low, high, repeats)

    @classmethod
    def with_timing(cls, timing: Timing | None, **fields: Any) -> Result:
        """A result whose step-time fields come from ``timing`` (``None``: not timed)."""
        if timing is None:
            return cls(**fields, step_time_s=None)
        return cls(
            **fields,
            step_time_s=timing.median_s,
            step_time_min_s=timing.min_s,
            step_time_max_s=timing.max_s,
            step_time_repeats=timing.repeats,
        )


@dataclasses.dataclass(frozen=True)
class DepthPoint:
    policy: str
    layers: int
    temp_bytes: int


class ExplorerDataError(recorded.RecordError):
    """A results file that is not what ``python -m examples.explorer`` writes."""


@dataclasses.dataclass(frozen=True)
class Run:
    runinfo: dict[str, Any]
    config: Config
    results: list[Result]
    depth: list[DepthPoint]
    #: The schema version the run was read from or will be written as.
    schema_version: int = 2

    def label(self) -> str:
        """Device, backend and versions: ``NVIDIA H100 80GB HBM3 (gpu, jax 0.11.2, jaxlib ...)``."""
        return recorded.label(self.runinfo)

    def to_json(self) -> dict[str, Any]:
        schema = {version: name for name, version in SCHEMAS.items()}[self.schema_version]
        results = [dataclasses.asdict(r) for r in self.results]
        if self.schema_version == 1:
            results = [{k: v for k, v in r.items() if k not in SPREAD_FIELDS} for r in results]
        return {
            "schema": schema,
            "runinfo": self.runinfo,
            "config": dataclasses.asdict(self.config),
            "results": results,
            "depth": [dataclasses.asdict(p) for p in self.depth],
        }


def save(run: Run, path: str | Path) -> None:
    """Write ``run`` as JSON; an existing file is never overwritten (``FileExistsError``)."""
    recorded.write_new(path, run.to_json())


def _result(data: Any, where: str, version: int) -> Result:
    if version == 1:
        if isinstance(data, dict) and (extra := sorted(set(SPREAD_FIELDS) & set(data))):
            raise ExplorerDataError(f"{where}: {', '.join(extra)} belong to schema version 2")
        return recorded.build(Result, data, where, ExplorerDataError, optional=SPREAD_FIELDS)
    result = recorded.build(Result, data, where, ExplorerDataError)
    if result.step_time_s is not None:
        low, high = result.step_time_min_s, result.step_time_max_s
        if low is None or high is None or not low <= result.step_time_s <= high:
            raise ExplorerDataError(
                f"{where}: step time median {result.step_time_s} is not within its recorded "
                f"range {low}..{high}"
            )
    return result


def load(path: str | Path) -> Run:
    """Read a results file of either schema, checking its shape; errors name file and problem."""
    name = Path(path).name
    data, version = recorded.read(
        path, SCHEMAS, ExplorerDataError, fields={"results": list, "depth": list}
    )
    return Run(
        data["runinfo"],
        recorded.build(Config, data.get("config"), f"{name}: config", ExplorerDataError),
        [_result(r, f"{name}: results[{i}]", version) for i, r in enumerate(data["results"])],
        [
            recorded.build(DepthPoint, p, f"{name}: depth[{i}]", ExplorerDataError)
            for i, p in enumerate(data["depth"])
        ],
        version,
    )


def load_all(folder: str | Path = RUNS) -> list[Run]:
    """Every results file in ``folder`` (by default the committed runs), in name order."""
    return recorded.load_all(folder, load)
