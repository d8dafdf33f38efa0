"""Where a policy reaches, and what it costs: the last three sections of the policy reference.

- Nested checkpoints (:func:`nested`, :func:`nested_table`): which policy decides what the
  forward pass keeps when one checkpoint holds another, on the default implementation and under
  ``jax_remat3``.
- A name inside a ``custom_vjp`` forward rule (:func:`layer_with_own_rule`,
  :func:`custom_rule_name_kept`): whether ``save_only_these_names`` still finds it.
- The bytes a policy keeps for a layer of the reader's own (:func:`kept_bytes`), in public JAX
  only: the arrays that :func:`jax.vjp`'s backward function holds.

``tests/reference/test_policy_scope.py`` checks each against an independent reading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.tools.display import Table
from examples.tools.residuals import Residuals, saved_residuals

P = jax.checkpoint_policies


# --- nested checkpoints -------------------------------------------------------------------------


def inner_block(w: jax.Array, x: jax.Array) -> jax.Array:
    """Two ``sin(w @ x)`` steps, their outputs named ``"a"`` and ``"b"``."""
    a = checkpoint_name(jnp.sin(w @ x), "a")
    b: jax.Array = checkpoint_name(jnp.sin(w @ a), "b")
    return b


def nested(
    outer_policy: Any, inner_policy: Any, *, outer: bool = True, inner: bool = True
) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """A checkpoint around a step named ``"c"`` and a checkpointed :func:`inner_block`;
    ``outer=False`` or ``inner=False`` leaves that checkpoint out (the tests' references)."""
    block = jax.checkpoint(inner_block, policy=inner_policy) if inner else inner_block

    def whole(w: jax.Array, x: jax.Array) -> jax.Array:
        c = checkpoint_name(jnp.sin(w @ x), "c")
        return jnp.sum(jnp.sin(block(w, c)))

    return jax.checkpoint(whole, policy=outer_policy) if outer else whole


def nested_inputs() -> tuple[jax.Array, jax.Array]:
    return jax.random.normal(jax.random.key(3), (4, 4)) / 2, jnp.linspace(-1.0, 1.0, 4)


def nested_cases() -> dict[str, tuple[Any, Any]]:
    """(outer policy, inner policy) by the row label the page shows."""
    names = P.save_only_these_names
    return {
        'outer `nothing_saveable`, inner `names("a")`': (P.nothing_saveable, names("a")),
        'outer `names("a")`, inner `nothing_saveable`': (names("a"), P.nothing_saveable),
        'outer `names("a", "b")`, inner `names("b")`': (names("a", "b"), names("b")),
        'outer `everything_saveable`, inner `names("a")`': (P.everything_saveable, names("a")),
    }


def kept_of(listing: Residuals) -> str:
    """``"'a', 'b'"``, or ``"3 × remat2"``: the computed values a listing keeps, by name, or by
    the primitive that made them."""
    labels = [
        f"`'{r.name}'`" if r.kind == "named" else f"`{r.detail}`"
        for r in listing.excluding_arguments()
    ]
    if not labels:
        return "nothing"
    counts = {label: labels.count(label) for label in labels}
    return ", ".join(f"{n} × {label}" if n > 1 else label for label, n in counts.items())


def nested_kept(outer_policy: Any, inner_policy: Any, remat3_on: bool | None) -> str:
    """What :func:`nested` keeps, with ``jax_remat3`` as given (``None``: left as it is)."""
    from examples.notes.remat3_check import remat3_flag

    if remat3_on is None:
        return kept_of(saved_residuals(nested(outer_policy, inner_policy), *nested_inputs()))
    with remat3_flag(remat3_on):
        return kept_of(saved_residuals(nested(outer_policy, inner_policy), *nested_inputs()))


def nested_table() -> Table:
    """Each case of :func:`nested_cases`, default implementation and (where the release has the
    flag) ``jax_remat3``."""
    from examples.notes.remat3_check import flag_available

    flags: list[bool | None] = [False, True] if flag_available() else [None]
    header = ["policies", "default keeps"] + ["`jax_remat3` keeps"] * flag_available()
    rows = [
        (case, *(nested_kept(outer, inner, on) for on in flags))
        for case, (outer, inner) in nested_cases().items()
    ]
    return Table(header, rows, align=["left"] * len(header))


def sines_in_gradient(inner_policy: Any) -> int:
    """``sin`` evaluations in the lowered gradient of :func:`nested` with an outer
    ``nothing_saveable``: the outer keeps nothing, so a difference between inner policies is the
    inner policy at work while the backward pass recomputes the outer body."""
    f = nested(P.nothing_saveable, inner_policy)
    return jax.jit(jax.grad(f)).lower(*nested_inputs()).as_text().count("stablehlo.sine")


def nested_everything_sentence() -> str:
    """The page's clause on an outer ``everything_saveable`` around an inner
    ``save_only_these_names("a")``, measured on the installed JAX."""
    from examples.notes.remat3_check import flag_available

    inner = P.save_only_these_names("a")
    args = nested_inputs()
    flat = saved_residuals(nested(None, None, outer=False, inner=False), *args)
    default = nested_kept(P.everything_saveable, inner, False if flag_available() else None)
    count = sum(int(p.split(" × ")[0]) if " × " in p else 1 for p in default.split(", "))
    plain = len(flat.excluding_arguments())
    text = (
        f"the default implementation keeps all {count} values that no checkpoint keeps: the "
        "inner policy is overruled"
        if count == plain
        else f"the default implementation keeps {count} values, where no checkpoint keeps {plain}"
    )
    if not flag_available():
        return text
    flagged = nested_kept(P.everything_saveable, inner, True)
    if "'a'" in flagged and "'b'" not in flagged:
        return (
            text + ". Under `jax_remat3` on this JAX, `everything_saveable` is no checkpoint at "
            "all, so the inner policy decides within its own scope: it keeps `'a'` and not `'b'`"
        )
    return text + f". Under `jax_remat3` on this JAX it keeps {flagged}"


# --- a name inside a custom_vjp forward rule --------------------------------------------------


@jax.custom_vjp
def layer_with_own_rule(w: jax.Array, x: jax.Array) -> jax.Array:
    """``sin(w @ x)`` with a VJP of its own; its forward rule names the product ``"z"``."""
    return jnp.sin(w @ x)


def _layer_fwd(w: jax.Array, x: jax.Array) -> tuple[jax.Array, tuple[jax.Array, ...]]:
    z = checkpoint_name(w @ x, "z")
    return jnp.sin(z), (w, x, jnp.cos(z))


def _layer_bwd(res: tuple[jax.Array, ...], g: jax.Array) -> tuple[jax.Array, jax.Array]:
    w, x, cos_z = res
    gz = g * cos_z
    return jnp.outer(gz, x), w.T @ gz


layer_with_own_rule.defvjp(_layer_fwd, _layer_bwd)


def loss_with_own_rule(w: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.sum(jnp.sin(layer_with_own_rule(w, x)))


def custom_rule_name_kept(remat3_on: bool | None) -> str:
    """What ``save_only_these_names("z")`` keeps of :func:`loss_with_own_rule` (``None``: the
    flag left as it is)."""
    from examples.notes.remat3_check import remat3_flag

    def kept_now() -> str:  # built under the flag: some releases read it when wrapping
        f = jax.checkpoint(loss_with_own_rule, policy=P.save_only_these_names("z"))
        return kept_of(saved_residuals(f, *nested_inputs()))

    if remat3_on is None:
        return kept_now()
    with remat3_flag(remat3_on):
        return kept_now()


# --- the bytes a policy keeps, in public JAX --------------------------------------------------


def kept_bytes(f: Callable[..., Any], *args: Any) -> dict[str, int]:
    """What the backward pass of ``f`` at ``args`` holds: the arrays inside the function that
    :func:`jax.vjp` returns, each counted once, split into the values computed on the forward
    pass and the inputs it holds on to (alive anyway). Runs ``f`` once: pass one layer for a
    per-layer figure."""
    _, backward = jax.vjp(f, *args)
    inputs = jax.tree_util.tree_leaves(args)
    held = {id(a): a for a in jax.tree_util.tree_leaves(backward) if hasattr(a, "nbytes")}
    is_input = [any(a is i for i in inputs) for a in held.values()]
    pairs = list(zip(held.values(), is_input, strict=True))
    return {
        "computed": sum(a.nbytes for a, inp in pairs if not inp),
        "inputs": sum(a.nbytes for a, inp in pairs if inp),
        "arrays": len(held),
    }


def custom_rule_name_sentence() -> str:
    """The page's sentence on :func:`custom_rule_name_kept` under ``jax_remat3``."""
    from examples.notes.remat3_check import flag_available

    if not flag_available():
        return f"there is nothing to compare on jax {jax.__version__}, which has no such flag."
    if custom_rule_name_kept(True) == "nothing":
        return (
            "on this JAX, a name made inside the forward rule reaches no policy: nothing is "
            "kept, and `z` is recomputed."
        )
    return f"on this JAX, the same call keeps {custom_rule_name_kept(True)}."
