"""Every checkpoint policy of the installed JAX: a catalogue, one common model, and what each saves.

The reference page iterates over :data:`CATALOGUE`; ``tests/test_policies.py`` fails as soon as
the installed JAX has a public name in ``jax.checkpoint_policies`` that the catalogue does not
describe, so the page cannot silently fall behind a JAX release.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from examples.residuals import Residuals, format_bytes, saved_residuals

P = jax.checkpoint_policies
Kind = Literal["policy", "factory", "combinator", "offload"]

#: The names the model below gives its intermediate values with ``checkpoint_name``.
NAMES = ("pre_activation", "hidden")


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    kind: Kind
    allows: str  #: what the policy lets the forward pass keep
    when: str  #: when to reach for it
    build: Callable[[], Callable[..., Any]]  #: a concrete policy for :func:`model`

    @property
    def obj(self) -> Any:
        return getattr(P, self.name)

    @property
    def alias_of(self) -> str | None:
        """The canonical name this one is the very same object as, if any."""
        for other in _CANONICAL:
            if other != self.name and getattr(P, other, None) is self.obj:
                return other
        return None


_CANONICAL = ("dots_saveable", "dots_with_no_batch_dims_saveable")

_OFFLOAD = {"offload_src": "device", "offload_dst": "pinned_host"}

CATALOGUE: tuple[Entry, ...] = (
    Entry(
        "everything_saveable",
        "policy",
        "every intermediate value the backward pass needs: the same as not checkpointing",
        "as a baseline, or to switch remat off for one run without editing the model",
        lambda: P.everything_saveable,
    ),
    Entry(
        "nothing_saveable",
        "policy",
        "nothing: only the checkpointed function's inputs survive, the rest is recomputed",
        "maximum memory saving; what `jax.checkpoint` does with no policy. Say it explicitly "
        "in configuration code: `policy=None` reads like 'no policy' but means this",
        lambda: P.nothing_saveable,
    ),
    Entry(
        "dots_saveable",
        "policy",
        "the output of every matrix product (`dot_general`), batched or not",
        "products are the expensive operations to redo; elementwise work is cheap to recompute",
        lambda: P.dots_saveable,
    ),
    Entry(
        "checkpoint_dots",
        "policy",
        "the same as `dots_saveable` (an older name)",
        "reading older code; write `dots_saveable` in new code",
        lambda: P.checkpoint_dots,
    ),
    Entry(
        "dots_with_no_batch_dims_saveable",
        "policy",
        "the output of matrix products that have no batch dimension (weights times "
        "activations), not batched products such as attention scores",
        "MLP-heavy models: keeps the weight products, recomputes the large per-example "
        "batched products. Under `jax.vmap` every product gets a batch dimension, and this "
        "policy then keeps none",
        lambda: P.dots_with_no_batch_dims_saveable,
    ),
    Entry(
        "checkpoint_dots_with_no_batch_dims",
        "policy",
        "the same as `dots_with_no_batch_dims_saveable` (an older name)",
        "reading older code; write `dots_with_no_batch_dims_saveable` in new code",
        lambda: P.checkpoint_dots_with_no_batch_dims,
    ),
    Entry(
        "save_only_these_names",
        "factory",
        "only values tagged with `checkpoint_name` under one of the given names",
        "you know exactly which activations are worth keeping and have named them",
        lambda: P.save_only_these_names("hidden"),
    ),
    Entry(
        "save_any_names_but_these",
        "factory",
        "named values only, except the names given; unnamed values are never kept",
        "many named values, a few of which are too big to keep",
        lambda: P.save_any_names_but_these("hidden"),
    ),
    Entry(
        "save_anything_except_these_names",
        "factory",
        "everything, named or not, except values with the given names",
        "no remat in general, but one or two huge tensors (attention logits, say) recomputed",
        lambda: P.save_anything_except_these_names("hidden"),
    ),
    Entry(
        "save_from_both_policies",
        "combinator",
        "whatever either of two policies allows (their union)",
        "combining a structural rule with names, e.g. products plus one named activation",
        lambda: P.save_from_both_policies(
            P.dots_with_no_batch_dims_saveable, P.save_only_these_names("hidden")
        ),
    ),
    Entry(
        "save_and_offload_only_these_names",
        "offload",
        "named values kept on the device, and other named values moved to another memory "
        "(`offload_dst`, e.g. `pinned_host`) until the backward pass fetches them back",
        "activations too big for accelerator memory but too expensive to recompute, on "
        "hardware where host transfers overlap with compute (GPU, TPU)",
        lambda: P.save_and_offload_only_these_names(
            names_which_can_be_saved=["pre_activation"],
            names_which_can_be_offloaded=["hidden"],
            **_OFFLOAD,
        ),
    ),
    Entry(
        "offload_dot_with_no_batch_dims",
        "offload",
        "the outputs of products without batch dimensions, moved to `offload_dst` instead of "
        "kept on the device",
        "like `dots_with_no_batch_dims_saveable` when even those products do not fit on the device",
        lambda: P.offload_dot_with_no_batch_dims(**_OFFLOAD),
    ),
)

BY_NAME = {entry.name: entry for entry in CATALOGUE}


def public_policy_names() -> set[str]:
    """The public names in the installed ``jax.checkpoint_policies``."""
    return {name for name in dir(P) if not name.startswith("_")}


def undocumented_policies() -> set[str]:
    """Public names of the installed JAX that the catalogue does not describe."""
    return public_policy_names() - set(BY_NAME)


def missing_from_jax() -> set[str]:
    """Catalogue entries the installed JAX does not have."""
    return set(BY_NAME) - public_policy_names()


# --- the common model --------------------------------------------------------------------------


def model(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    """A tiny block with both kinds of product.

    ``x @ w1`` and ``mixed @ w2`` contract activations with weights: products without batch
    dimensions. The two ``einsum`` calls mix positions within each example: products *with* a
    batch dimension ``b``, like attention.
    """
    pre = checkpoint_name(x @ w1, "pre_activation")
    hidden = checkpoint_name(jnp.tanh(pre), "hidden")
    scores = jnp.einsum("bsh,bth->bst", hidden, hidden)
    mixed = jnp.einsum("bst,bth->bsh", jax.nn.softmax(scores, axis=-1), hidden)
    return jnp.mean((mixed @ w2) ** 2)


def model_inputs(
    batch: int = 2, seq: int = 4, width: int = 8, seed: int = 0
) -> tuple[jax.Array, jax.Array, jax.Array]:
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    w1 = jax.random.normal(k1, (width, width)) / np.sqrt(width)
    w2 = jax.random.normal(k2, (width, width)) / np.sqrt(width)
    return w1, w2, jax.random.normal(k3, (batch, seq, width))


def model_float64(w1: Any, w2: Any, x: Any) -> float:
    """The model's value in NumPy float64: an independent reference."""
    w1, w2, x = (np.asarray(a, np.float64) for a in (w1, w2, x))
    hidden = np.tanh(x @ w1)
    scores = np.einsum("bsh,bth->bst", hidden, hidden)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    mixed = np.einsum("bst,bth->bsh", weights, hidden)
    return float(np.mean((mixed @ w2) ** 2))


def residuals(policy: Callable[..., Any] | None, *args: jax.Array) -> Residuals:
    """What ``jax.grad`` keeps for :func:`model` checkpointed under ``policy``.

    ``policy=None`` means no ``jax.checkpoint`` at all (the baseline).
    """
    args = args or model_inputs()
    f = model if policy is None else jax.checkpoint(model, policy=policy)
    return saved_residuals(f, *args)


def describe_saved(listing: Residuals) -> str:
    """ "2 × dot_general, hidden": what was computed and kept, grouped."""
    counts: dict[str, int] = {}
    for r in listing.excluding_arguments():
        label = r.name if r.kind == "named" else (r.detail or r.kind)
        if "<host>" in r.type_str or "pinned_host" in r.type_str:
            label += " (on host)"
        counts[label] = counts.get(label, 0) + 1
    if not counts:
        return "nothing (inputs only)"
    return ", ".join(f"{n} × {label}" if n > 1 else label for label, n in counts.items())


@dataclasses.dataclass(frozen=True)
class Row:
    policy: str
    alias_of: str | None
    saved: str
    count: int
    nbytes: int


def summary() -> list[Row]:
    args = model_inputs()
    rows = [Row("(no jax.checkpoint)", None, *_saved(residuals(None, *args)))]
    for entry in CATALOGUE:
        rows.append(Row(entry.name, entry.alias_of, *_saved(residuals(entry.build(), *args))))
    return rows


def _saved(listing: Residuals) -> tuple[str, int, int]:
    computed = listing.excluding_arguments()
    return describe_saved(listing), len(computed), computed.nbytes


def summary_markdown(rows: list[Row]) -> str:
    lines = [
        "| policy | computed values kept | count | bytes |",
        "| --- | --- | ---: | ---: |",
    ]
    for row in rows:
        name = f"`{row.policy}`" if not row.policy.startswith("(") else row.policy
        if row.alias_of:
            name += f" (= `{row.alias_of}`)"
        lines.append(f"| {name} | {row.saved} | {row.count} | {format_bytes(row.nbytes)} |")
    return "\n".join(lines)


# --- a policy of one's own ---------------------------------------------------------------------


def keep_big_products(min_elements: int) -> Callable[..., bool]:
    """A custom policy: keep a product's output only if it has at least ``min_elements``.

    A policy is called once per primitive application while JAX partially evaluates the
    checkpointed function, with the primitive, the abstract values of its inputs and its
    parameters; it returns whether the output may be saved.
    """

    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        if prim.name != "dot_general":
            return False
        out = jax.eval_shape(
            lambda *xs: prim.bind(*xs, **params),
            *(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals),
        )
        return int(np.prod(out.shape)) >= min_elements

    return policy
