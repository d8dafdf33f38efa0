"""The site's problems, found by discovery: one module per problem, named for the problem.

A problem is one module here, ``examples/problems/NAME.py``, one page, ``docs/problems/NAME.md``,
and its learner files in ``tests/solutions/NAME/``. The module declares
``PROBLEM = Problem(...)`` (:class:`examples.problems._spec.Problem`): its id ``NAME`` (the
learner's function name and the checker's PROBLEM argument), its position in the list, the
reference solution, and a ``make_cases`` that draws inputs with float64 expected values.
Nothing else registers it: :func:`problem_names` lists the modules (modules whose names start
with ``_`` are the machinery, not problems) and :func:`load_problem` imports one.

This package's ``__init__`` imports neither JAX nor the problem modules, so the checker's
command line can validate a PROBLEM argument and start its child process without paying for them.
``python -m examples.check PROBLEM FILE`` runs a problem's checks on a learner's solution.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from examples.problems._spec import Problem

__all__ = ["PROBLEMS", "DiscoveryError", "all_problems", "load_problem", "problem_names"]


class DiscoveryError(RuntimeError):
    """A module under ``examples/problems/`` does not declare a well-formed problem."""


def problem_names() -> list[str]:
    """The problem modules' names, found without importing them (unordered: alphabetical)."""
    return sorted(
        info.name
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_") and not info.ispkg
    )


def load_problem(name: str) -> Problem:
    """Import ``examples.problems.NAME`` and return its ``PROBLEM``, checked for consistency."""
    if name not in problem_names():
        raise KeyError(name)
    module = importlib.import_module(f"{__name__}.{name}")
    problem = getattr(module, "PROBLEM", None)
    from examples.problems._spec import Problem

    if not isinstance(problem, Problem):
        raise DiscoveryError(f"{module.__name__} declares no PROBLEM = Problem(...)")
    if problem.name != name:
        raise DiscoveryError(
            f"{module.__name__} declares the problem {problem.name!r}; a problem's module is "
            "named for it"
        )
    if getattr(module, name, None) is not problem.reference:
        raise DiscoveryError(
            f"{module.__name__}.{name} is not the PROBLEM's reference solution; the module "
            "defines the reference under the problem's name"
        )
    return problem


def all_problems() -> list[Problem]:
    """Every problem, in the order of their declared ``position``."""
    problems = [load_problem(name) for name in problem_names()]
    positions = [p.position for p in problems]
    if len(set(positions)) != len(positions):
        raise DiscoveryError(f"two problems declare the same position: {sorted(positions)}")
    return sorted(problems, key=lambda p: p.position)


def __getattr__(attr: str) -> Any:
    # PROBLEMS imports every problem module (and with them JAX and Flax), so only when asked.
    if attr == "PROBLEMS":
        return {p.name: p for p in all_problems()}
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
