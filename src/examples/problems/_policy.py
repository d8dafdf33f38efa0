"""The policy check: is the policy of the learner's checkpoint the one the problem asks for?

Compared by identity or equality, then by behaviour: what it keeps on a probe function (products
with and without batch dimensions, values named with the problem's names and with another), then
on the learner's own checkpointed function (:func:`own_function_policy`).
"""

from __future__ import annotations

import functools
import types
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.problems._kept import describe_computed, residual_signature
from examples.tools.jaxprs import remat3, remat3_available, remat3_enabled
from examples.tools.policy_calls import describe_policy, same_policy
from examples.tools.residuals import checkpoint_residuals, saved_residuals

# --- policies -------------------------------------------------------------------------------------


def policy_name(policy: Any) -> str:
    """How a policy reads in the checker's verdicts: the call that made it
    (``save_only_these_names('hidden')``, ``dots_with_no_batch_dims_saveable``), on any release."""
    if policy is None:
        # Under jax_remat3, jax.checkpoint turns nothing_saveable into None before tracing.
        return "no policy (JAX's default: keep nothing, as nothing_saveable does)"
    return describe_policy(policy)


def _other_names(policy: Any) -> str:
    """``" (also called checkpoint_dots: the same object)"`` where ``jax.checkpoint_policies``
    holds ``policy`` under more than one name; else ``""``."""
    names = [n for n, v in vars(jax.checkpoint_policies).items() if v is policy]
    shown = policy_name(policy)
    others = [n for n in names if n != shown]
    if not others or len(names) < 2:
        return ""
    return f" (also called {', '.join(others)}: the same object)"


def _is_plain_function(policy: Any) -> bool:
    """A policy written as a Python function (not one of JAX's own policy objects)."""
    return isinstance(policy, types.FunctionType) and not same_policy(
        policy, jax.checkpoint_policies.everything_saveable
    )


@functools.cache
def remat3_ignores_function_policies() -> bool:
    """Whether this JAX's ``jax_remat3`` recomputes everything instead of calling a policy
    written as a Python function (the releases that read only JAX's own policy objects), found
    by trying it: a function that wraps ``dots_with_no_batch_dims_saveable`` keeps nothing."""
    if not remat3_available():
        return False
    dots = jax.checkpoint_policies.dots_with_no_batch_dims_saveable

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return dots(*args, **kwargs)

    def f(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(a @ b))

    a = jnp.ones((2, 3), jnp.float32)
    with remat3(True):
        kept = saved_residuals(jax.checkpoint(f, policy=wrapper), a, a.T)
    return len(kept.excluding_arguments()) == 0


#: A name no problem asks for: the probe names a value so, so that a policy that keeps every
#: named value is told apart from one that keeps only the problem's names.
OTHER_NAME = "probe_other_name"


def _probe(a: jax.Array, b: jax.Array, c: jax.Array, names: tuple[str, ...]) -> jax.Array:
    """A product without batch dimensions, one with a batch dimension, elementwise work, and one
    elementwise value named with ``checkpoint_name`` per name in ``names``."""
    plain = a @ b
    batched = jnp.einsum("bij,bjk->bik", c, jnp.broadcast_to(b, (c.shape[0], *b.shape)))
    out = jnp.sum(jnp.sin(plain)) + jnp.sum(jnp.cos(batched))
    for i, name in enumerate(names):
        out = out + jnp.sum(jnp.cos(checkpoint_name(jnp.sin(a * (i + 2.0)), name)))
    return out


def policy_behaviour(
    policy: Any, names: tuple[str, ...] = ()
) -> tuple[tuple[str, str | None], ...]:
    """What ``jax.checkpoint(probe, policy=policy)`` keeps: (type, primitive or name) per value.

    The probe has a matrix product without batch dimensions, one with a batch dimension,
    elementwise functions, and a value named with each of ``names`` and with :data:`OTHER_NAME`,
    so it tells apart the policies a learner is likely to reach for, names-based ones included.
    """
    a = jnp.ones((3, 4), jnp.float32)
    b = jnp.ones((4, 5), jnp.float32)
    c = jnp.ones((2, 3, 4), jnp.float32)
    probe = functools.partial(_probe, names=(*names, OTHER_NAME))
    listing = saved_residuals(jax.checkpoint(probe, policy=policy), a, b, c)
    return tuple(sorted((r.type_str, r.detail) for r in listing.excluding_arguments()))


def compare_policy(
    found: Any,
    required: Any,
    required_behaviour: tuple[Any, ...] | None = None,
    names: tuple[str, ...] = (),
) -> tuple[bool, str]:
    """Whether ``found`` is the required policy, by identity/equality or by behaviour.

    ``required_behaviour`` is :func:`policy_behaviour` of ``required`` (with the same ``names``),
    if already known; ``names`` are the problem's ``checkpoint_name`` names.
    """
    wanted = policy_name(required)
    if isinstance(found, str):
        return False, (
            f"found the string {found!r}; a policy is an object "
            f"(jax.checkpoint_policies.{found}), not its name"
        )
    if found is None and required is None:
        return True, wanted
    if found is not None and required is not None and same_policy(found, required):
        return True, f"{wanted} (the same policy object)"
    try:
        mine = policy_behaviour(found, names)
        theirs = (
            policy_behaviour(required, names) if required_behaviour is None else required_behaviour
        )
    except Exception as err:  # a hand-written policy that JAX cannot use
        return False, f"the policy {policy_name(found)} fails on a probe function: {err}"
    probe = "a probe with batched and unbatched products"
    if names:
        probe += f" and values named {', '.join(repr(n) for n in names)} and otherwise"
    if mine == theirs:
        return True, (
            f"{policy_name(found)}: another object, but it keeps exactly what {wanted} keeps on "
            + probe
        )
    detail = f"found {policy_name(found)}{_other_names(found)}; the problem asks for {wanted}"
    if remat3_enabled() and _is_plain_function(found) and remat3_ignores_function_policies():
        detail += (
            " (under jax_remat3, JAX does not call a policy written as a function: it recomputes "
            "everything, so pass JAX's policy object itself)"
        )
    return False, detail


def own_function_policy(site: Any, required: Any, verdict: tuple[bool, str]) -> tuple[bool, str]:
    """A policy that passed on the probe (:func:`compare_policy`) but is not the required object
    is tried on the learner's own checkpointed function too: what it keeps there must be what the
    required policy keeps there (a policy that saves ``tanh`` outputs acts like keep-nothing on a
    probe without ``tanh``)."""
    ok, detail = verdict
    found = site.policy
    same = found is required or (
        found is not None and required is not None and same_policy(found, required)
    )
    if not ok or same:
        return verdict
    try:
        mine = checkpoint_residuals(site)
        theirs = checkpoint_residuals(site, required)
    except Exception:  # JAX cannot say for this function: the probe's verdict stands
        return verdict
    if residual_signature(mine) == residual_signature(theirs):
        return True, f"{detail}, and on your checkpointed function"
    return False, (
        f"{policy_name(site.policy)} keeps what {policy_name(required)} keeps on a probe, but not "
        f"on your checkpointed function: there it keeps {describe_computed(mine)} where "
        f"{policy_name(required)} keeps {describe_computed(theirs)}"
    )
