"""What a JAX or Python error most likely means in a remat solution: the hints the checker says
beside JAX's own message (:func:`hint`), for :func:`examples.problems._runner.what_it_did`.

Each hint is matched on the error's type and text (a policy called with no arguments, a policy
given by position, the names of a ``save_*`` factory given as a list, a traced value used by
Python control flow under ``jax.jit`` or under a checkpoint) and says what to do instead.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable
from typing import Any

#: ``checkpoint() takes 1 positional argument but 2 were given`` (jax.checkpoint, jax.remat),
#: ``remat() takes from 0 to 1 positional arguments but 2 were given`` (nnx.remat)
_POSITIONAL = re.compile(
    r"\b(checkpoint|remat)\(\) takes .*positional arguments? but \d+ were given"
)
#: ``dots_with_no_batch_dims_saveable() missing 1 required positional argument: 'prim'``
# "dots_saveable() missing ..." where a policy is a function; "DotsSaveable.__call__() missing ..."
# where it is an object (jax 0.6 to 0.10: the dots policies are instances of a class).
_CALLED_POLICY = re.compile(
    r"(?:(\w+)\.__call__|(\w+))\(\) missing \d required positional arguments?: 'prim'"
)


def policy_attribute(function_name: str, class_name: str | None = None) -> str:
    """The name under which the installed ``jax.checkpoint_policies`` offers the policy whose
    function is called ``function_name`` (on jax 0.5.0 the function behind
    ``dots_with_no_batch_dims_saveable`` is called ``dot_with_no_batch_dims_saveable``, a name
    the namespace lacks), or, for a policy that is an object, whose class is ``class_name``. The
    first of its names that is not a ``checkpoint_*`` alias; where one class holds several
    policies (jax 0.10.2's ``DotsSaveable``), those names joined by "or"."""
    import jax

    def matches(name: str, value: object) -> bool:
        if class_name is not None:
            return type(value).__name__ == class_name
        return name == function_name or getattr(value, "__name__", None) == function_name

    names = [name for name, value in vars(jax.checkpoint_policies).items() if matches(name, value)]
    if function_name in names:
        return function_name
    plain = [name for name in names if not name.startswith("checkpoint_")]
    if class_name is not None and len(plain) > 1:
        return " or ".join(sorted(plain))
    return (plain or names or [class_name or function_name])[0]


def _raised_in(err: BaseException, prefix: str) -> bool:
    """Whether a frame of ``err``'s traceback is a function whose name starts with ``prefix``."""
    return any(frame.name.startswith(prefix) for frame in traceback.extract_tb(err.__traceback__))


def _uses_linen(fn: Callable[..., Any] | None) -> bool:
    """Whether the learner's module imported Flax linen (``import flax.linen as nn``)."""
    globals_ = getattr(fn, "__globals__", {})
    return any(getattr(v, "__name__", "") == "flax.linen" for v in globals_.values())


def hint(err: BaseException, text: str, fn: Callable[..., Any] | None = None) -> str:
    """What a JAX or Python error most likely means in a remat solution: said beside JAX's own
    message, which the line keeps."""
    called = _CALLED_POLICY.search(text)
    if isinstance(err, TypeError) and called:
        name = policy_attribute(called[2] or "", called[1])
        policy = " or ".join(f"jax.checkpoint_policies.{n}" for n in name.split(" or "))
        return (
            f"a checkpoint policy was called with no arguments: {name} is itself the policy, "
            "which JAX calls once per operation; pass it without (), "
            f"policy={policy} (only the save_* factories, such as "
            "save_only_these_names('name'), are called, to make a policy)"
        )
    if (
        isinstance(err, TypeError)
        and "unhashable type: 'list'" in text
        and _raised_in(err, "save_")
    ):
        return (
            "the save_* policy factories take each name as its own argument: "
            "save_only_these_names('a', 'b'), not a list; unpack one you have, "
            "save_only_these_names(*names)"
        )
    positional = _POSITIONAL.search(text)
    if isinstance(err, TypeError) and positional:
        return (
            f"{positional[1]}() takes only the function by position: pass the policy by keyword, "
            f"{positional[1]}(f, policy=...)"
        )
    if type(err).__name__ == "InvalidFilterError" and "<function" in text:
        # flax.linen's nn.checkpoint(Module, dots): its second positional argument is the
        # variable collections to lift, a filter.
        return (
            "nn.checkpoint and nn.remat take the collections to lift (variables=) second: is a "
            "policy given by position? Pass it by keyword, policy=..."
        )
    if "<class 'function'>" in text and (
        "Cannot interpret value" in text or "is not a valid JAX type" in text
    ):
        # JAX was handed a function where it wanted an array: most often a policy given by
        # position to a decorator, @nnx.remat(dots), which binds it to an argument.
        return (
            "a function was passed where JAX expected an array: is a policy given by position? "
            "Pass it by keyword, policy=..."
        )
    if type(err).__name__ in _TRACER_ERRORS and _TRACED_FOR_JIT.search(text):
        return (
            "Python control flow (if, bool(), int()) on a value that jax.jit traces: jit traces "
            "every argument of the function it wraps unless static_argnums or static_argnames "
            "names it; mark the Python number static, or jit only the part that takes arrays"
        )
    if type(err).__name__ in _TRACER_ERRORS:
        hint = (
            "Python control flow (if, bool(), int()) on a value JAX traces: an argument of the "
            "checkpointed function is traced unless static_argnums names it"
        )
        if _uses_linen(fn):
            hint += (
                "; nn.checkpoint and nn.remat count self as argument 0, so in "
                "__call__(self, x, flag) the flag is static_argnums=(2,)"
            )
        return hint
    return ""


#: JAX's tracer errors name the transformation that traced the value: "... while tracing the
#: function f at FILE:LINE for jit."
_TRACED_FOR_JIT = re.compile(r"while tracing the function .* for p?jit\b")

#: JAX's errors for a traced value used where Python needs a concrete one.
_TRACER_ERRORS = frozenset(
    {"ConcretizationTypeError", "TracerBoolConversionError", "TracerIntegerConversionError"}
)
