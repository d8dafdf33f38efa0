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
    if "policy_1" in variables:
        for inner in (variables["policy_1"], variables["policy_2"]):
            found |= policy_names(inner) or set()
    named = factory_of(policy) == "save_and_offload_only_these_names"
    return frozenset(found) if found or named else None


def wants_unbatched_dots(policy: Any) -> bool:
    """Whether the policy keeps (or offloads) matrix products without batch dimensions."""
    if getattr(policy, "only_if_no_batch_dims", False) is True:  # DotsSaveable(True)
        return True
    if factory_of(policy) == "offload_dot_with_no_batch_dims":
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
    factory = factory_of(policy) or _CLASS_FACTORIES.get(type(policy).__name__)
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


# --- releases whose offloading policies are dataclasses (jax 0.11) ------------------------------

#: The factories that return the offloading policies' classes, where a release has them.
_OFFLOAD_CLASS_FACTORIES = {
    "SaveAndOffloadOnlyTheseNames": "save_and_offload_only_these_names",
    "OffloadDotWithNoBatchDims": "offload_dot_with_no_batch_dims",
}


def _both(policy: Any) -> tuple[Any, Any] | None:
    variables = closure_variables(policy)
    return (variables["policy_1"], variables["policy_2"]) if "policy_1" in variables else None


def policy_names_of_any(policy: Any) -> frozenset[str] | None:
    """:func:`policy_names`, also where ``save_and_offload_only_these_names`` is a dataclass."""
    if type(policy).__name__ == "SaveAndOffloadOnlyTheseNames":
        return frozenset(policy.names_which_can_be_saved) | set(policy.names_which_can_be_offloaded)
    both = _both(policy)
    if both is None:
        return policy_names(policy)
    found = [policy_names_of_any(inner) for inner in both]
    union = frozenset().union(*(f for f in found if f is not None))
    return union if union or any(f is not None for f in found) else None


def wants_unbatched_dots_of_any(policy: Any) -> bool:
    """:func:`wants_unbatched_dots`, also where ``offload_dot_with_no_batch_dims`` is a class."""
    if type(policy).__name__ == "OffloadDotWithNoBatchDims":
        return True
    both = _both(policy)
    if both is None:
        return wants_unbatched_dots(policy)
    return any(wants_unbatched_dots_of_any(inner) for inner in both)


def describe_policy_of_any(policy: Any) -> str:
    """:func:`describe_policy`, also where the offloading policies are dataclasses."""
    factory = _OFFLOAD_CLASS_FACTORIES.get(type(policy).__name__)
    if factory == "save_and_offload_only_these_names":
        names = sorted(policy_names_of_any(policy) or ())
        return f"{factory}({', '.join(repr(n) for n in names)})"
    if factory is not None:
        return factory
    both, outer = _both(policy), factory_of(policy)
    if both is not None and outer is not None:
        return f"{outer}({', '.join(describe_policy_of_any(inner) for inner in both)})"
    return describe_policy(policy)
