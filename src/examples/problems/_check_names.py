"""The names of the checks a checker run reports, in order: read by both sides of the checker.

The parent process (:mod:`examples.problems._process`, :mod:`examples.check`) reads them without
importing JAX; the child (:mod:`examples.problems._runner`) and the checks themselves
(:mod:`examples.problems._checks`) report under them. Kept here, apart from both, so that neither
imports the other for them.
"""

from __future__ import annotations

#: The checks of :func:`examples.problems._checks.standard_checks`, in the order they run
#: (here, where the checker's parent process can read them without importing JAX).
CHECK_NAMES = (
    "signature",
    "runs",
    "shape",
    "dtype",
    "finite",
    "value",
    "gradient",
    "remat",
    "policy",
    "residuals",
)
#: What every run starts with, before the problem's checks, and ends with, after them.
LOAD_CHECK = "load"
CONFIG_CHECK = "config"


def check_names() -> list[str]:
    """The names of the checks a run reports, in order (load and config included)."""
    return [LOAD_CHECK, *CHECK_NAMES, CONFIG_CHECK]
