"""Which software and hardware executed a page: shown at the top of every executed page.

Figures on this site (residual listings, compiled memory, FLOPs, timings) depend on the JAX
release and the backend that produced them, so each page states both, read at execution time.
"""

from __future__ import annotations

import dataclasses
import html
import importlib.metadata
import platform

import jax


@dataclasses.dataclass(frozen=True)
class RunInfo:
    jax: str
    jaxlib: str
    flax: str
    python: str
    backend: str  #: "cpu", "gpu" or "tpu"
    device: str  #: the first device's kind, e.g. "cpu" or "NVIDIA H100 80GB HBM3"
    device_count: int

    def as_dict(self) -> dict[str, str | int]:
        return dataclasses.asdict(self)

    def one_line(self) -> str:
        devices = f"{self.device_count} × {self.device}" if self.device_count > 1 else self.device
        return (
            f"jax {self.jax} · jaxlib {self.jaxlib} · flax {self.flax} · "
            f"backend {self.backend} ({devices}) · Python {self.python}"
        )


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def collect() -> RunInfo:
    """Read the versions and the default backend of this process."""
    devices = jax.devices()
    return RunInfo(
        jax=jax.__version__,
        jaxlib=_version("jaxlib"),
        flax=_version("flax"),
        python=platform.python_version(),
        backend=jax.default_backend(),
        device=devices[0].device_kind,
        device_count=len(devices),
    )


class Banner:
    """A one-line note for the top of a page; renders as HTML in a notebook, text elsewhere."""

    def __init__(self, info: RunInfo) -> None:
        self.info = info

    def __repr__(self) -> str:
        return f"Executed with {self.info.one_line()}"

    def _repr_html_(self) -> str:
        return (
            '<p class="remat-runinfo"><strong>Executed with</strong> '
            f"{html.escape(self.info.one_line())}. Outputs on this page were produced by these "
            "versions when the site was built; other releases may print other residuals or "
            "figures.</p>"
        )


def banner() -> Banner:
    return Banner(collect())
