"""Which software and hardware executed a page: shown at the top of every executed page.

Figures on this site (residual listings, compiled memory, FLOPs, timings) depend on the JAX
release and the backend that produced them, so each page states both, read at execution time.

The banner, as every page's first cell, also sets how the page's plots are written
(:func:`plots_as_svg`): SVG, a few kilobytes gzipped and sharp on any screen, where a PNG would be
tens of kilobytes and blurred on a phone.
"""

from __future__ import annotations

import dataclasses
import html
import importlib
import importlib.metadata
import platform
from pathlib import Path

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
    """A one-line note for the top of a page; renders as HTML in a notebook, text elsewhere.

    It stays one short line (the versions only), and the "Run this page yourself" note that
    follows it on the site is folded (docs/_ext/take_home.py): on a phone the two take a few
    lines, and the page's first sentence shows on its first screen.
    """

    def __init__(self, info: RunInfo) -> None:
        self.info = info

    def __repr__(self) -> str:
        return f"Executed with {self.info.one_line()}"

    def _repr_html_(self) -> str:
        # One short line, the versions only, so that the page's first screen belongs to its text.
        return (
            '<p class="remat-runinfo"><strong>Executed with</strong> '
            f"{html.escape(self.info.one_line())}</p>"
        )


def plots_as_svg() -> bool:
    """Have IPython's inline backend show matplotlib figures as compact, reproducible SVG.

    Text stays text (``svg.fonttype = "none"``, set in the browser's sans-serif font) instead of
    a path per glyph, which halves the file; fixed element ids and no date make two builds of
    one commit write the same file. Only in an IPython kernel with matplotlib installed (a
    site build); elsewhere nothing changes and it returns False.
    """
    try:  # imported by name: neither is a dependency of this package, nor typed
        ipython = importlib.import_module("IPython")
        if ipython.get_ipython() is None:
            return False
        import matplotlib

        inline = importlib.import_module("matplotlib_inline.backend_inline")
    except ImportError:
        return False
    matplotlib.rcParams["svg.fonttype"] = "none"
    matplotlib.rcParams["svg.hashsalt"] = "jax-remat-guide"
    inline.set_matplotlib_formats("svg", metadata={"Date": None})
    return True


def banner() -> Banner:
    """The page's banner; in a notebook, plots from here on are written as SVG."""
    plots_as_svg()
    return Banner(collect())


def cpu_model(fallback: str) -> str:
    """The CPU's model name as ``/proc/cpuinfo`` gives it; ``fallback`` where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return fallback
