"""A checkpoint policy read back as the call that made it, on every supported JAX release.

JAX's policies are plain functions on older releases, dataclasses (``SaveOnlyTheseNames``,
``DotsSaveable``, ...) on some, and closures made by a factory on the newest.
:func:`describe_policy` writes any of them as the reader would have written it
(``save_only_these_names('a', 'b')``); :func:`policy_names` and :func:`wants_unbatched_dots` read
what a policy refers to. The diagnostic (:mod:`examples.howto.diagnose`) and the problems'
checker (:mod:`examples.problems`) both use these, so a policy reads the same everywhere.
"""

from __future__ import annotations

import inspect
from typing import Any

import jax

P = jax.checkpoint_policies

#: The factories that return these classes, as the installed JAX spells them.
_CLASS_FACTORIES = {
    "SaveOnlyTheseNames": "save_only_these_names",
    "SaveAnyNamesButThese": "save_any_names_but_these",
    # jax 0.11 made the offloading policies dataclasses too.
    "SaveAndOffloadOnlyTheseNames": "save_and_offload_only_these_names",
    "OffloadDotWithNoBatchDims": "offload_dot_with_no_batch_dims",
}


def same_policy(a: Any, b: Any) -> bool:
    """The same policy: one object, or equal (two ``DotsSaveable(True)`` instances are)."""
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def closure_variables(policy: Any) -> dict[str, Any]:
    """The variables a policy made by a factory (``save_from_both_policies``, ...) closes over."""
    if not inspect.isfunction(policy):
        return {}
    return dict(inspect.getclosurevars(policy).nonlocals)


def factory_of(policy: Any) -> str | None:
    """``"save_from_both_policies"`` for a function defined inside that factory, else ``None``."""
    qualname = getattr(policy, "__qualname__", "")
    return qualname.split(".<locals>.")[0] if ".<locals>." in qualname else None


def _factory(policy: Any) -> str | None:
    """The factory that made a policy: a closure's, or a dataclass's on releases that have them."""
    return factory_of(policy) or _CLASS_FACTORIES.get(type(policy).__name__)


def policy_names(policy: Any) -> frozenset[str] | None:
    """The ``checkpoint_name`` names a policy refers to, or ``None`` if it refers to none.

    Read from the installed JAX's objects: the dataclasses of some releases hold the names as a
    field; the closures of the others (and ``save_and_offload_only_these_names``,
    ``save_from_both_policies`` on every release) hold them in their variables.
    """
    for field in ("saveable_names", "names"):  # SaveOnlyTheseNames, SaveAnyNamesButThese
        names = getattr(policy, field, None)
        if isinstance(names, frozenset | set):
            return frozenset(names)
    variables = closure_variables(policy)
    found: set[str] = set()
    for key in ("names_which_can_be_saved", "names_which_can_be_offloaded", "names_not_to_save"):
        found |= set(variables.get(key, ()))
        found |= set(getattr(policy, key, ()))  # SaveAndOffloadOnlyTheseNames (jax 0.11)
    if "policy_1" in variables:
        for inner in (variables["policy_1"], variables["policy_2"]):
            found |= policy_names(inner) or set()
    named = _factory(policy) == "save_and_offload_only_these_names"
    return frozenset(found) if found or named else None


def wants_unbatched_dots(policy: Any) -> bool:
    """Whether the policy keeps (or offloads) matrix products without batch dimensions."""
    if getattr(policy, "only_if_no_batch_dims", False) is True:  # DotsSaveable(True)
        return True
    if _factory(policy) == "offload_dot_with_no_batch_dims":
        return True
    if policy is P.dots_with_no_batch_dims_saveable:  # a plain function on older releases
        return True
    variables = closure_variables(policy)
    return any(
        wants_unbatched_dots(variables[k]) for k in ("policy_1", "policy_2") if k in variables
    )


def describe_policy(policy: Any) -> str:
    """How the policy would be written: ``save_only_these_names('a', 'b')``, ``None``, ...

    A function of the reader's own reads ``the function NAME``; any other object, its ``repr``.
    """
    if policy is None:
        return "None"
    # The aliases checkpoint_dots* last, so that dots_saveable is called by its main name.
    for name in sorted(vars(P), key=lambda n: (n.startswith("checkpoint_"), n)):
        if not name.startswith("_") and same_policy(getattr(P, name), policy):
            return name  # nothing_saveable, dots_with_no_batch_dims_saveable, ...
    factory = _factory(policy)
    variables = closure_variables(policy)
    if factory is not None and "policy_1" in variables:  # save_from_both_policies(a, b)
        inner = ", ".join(describe_policy(variables[k]) for k in ("policy_1", "policy_2"))
        return f"{factory}({inner})"
    names = policy_names(policy)
    if factory is not None and names is not None:
        return f"{factory}({', '.join(repr(n) for n in sorted(names))})"
    if factory is not None:
        return factory
    if inspect.isfunction(policy):
        return f"the function {policy.__qualname__}"
    return repr(policy)
