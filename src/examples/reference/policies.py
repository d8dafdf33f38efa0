"""Every checkpoint policy of the installed JAX: a catalogue, one common model, and what each saves.

The reference page iterates over :data:`CATALOGUE`; ``tests/reference/test_policies.py`` fails as
soon as the installed JAX has a public name in ``jax.checkpoint_policies`` that the catalogue does
not describe, so the page cannot silently fall behind a JAX release.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

from examples.tools.display import Table, format_bytes
from examples.tools.residuals import Residuals, saved_residuals

P = jax.checkpoint_policies
Kind = Literal["policy", "factory", "combinator", "offload", "class"]

#: The names the model below gives its intermediate values with ``checkpoint_name``.
NAMES = ("pre_activation", "hidden")


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    kind: Kind
    allows: str  #: what the policy lets the forward pass keep
    when: str  #: when to reach for it
    build: Callable[[], Callable[..., Any]]  #: a concrete policy for :func:`model`
    #: Public only in some JAX releases (the class behind a factory, say): absent is fine.
    optional: bool = False

    @property
    def obj(self) -> Any:
        """The object in the installed ``jax.checkpoint_policies`` (``None`` if absent)."""
        return getattr(P, self.name, None)

    @property
    def alias_of(self) -> str | None:
        """The earlier catalogue name bound to the very same object, if any."""
        return ALIASES.get(self.name)


_OFFLOAD = {"offload_src": "device", "offload_dst": "pinned_host"}

CATALOGUE: tuple[Entry, ...] = (
    Entry(
        "everything_saveable",
        "policy",
        "every intermediate value the backward pass needs: the residuals of no checkpoint",
        "as a baseline that keeps what no checkpoint keeps. It is not a free way to switch remat "
        "off: the compiled program can differ from the one without `jax.checkpoint` (measured "
        "on the reference page)",
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
        "the output of every matrix product (`dot_general`), batched or not, and of every "
        "convolution (`conv_general_dilated`)",
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
        "batched products. Under `jax.vmap` a product whose operands are both mapped (per-stage "
        "weights) gets a batch dimension, and this policy then drops it; with shared weights "
        "it still keeps it",
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
        "documented as: everything, named or not, except values with the given names. The "
        "installed JAX may ignore the names and save everything: see `excluded_names_honoured()`",
        "nowhere yet: even where the names are honoured, the unnamed value that feeds "
        "`checkpoint_name` is saveable in its place. Name what to keep and use "
        "`save_any_names_but_these` or `save_only_these_names` instead",
        lambda: P.save_anything_except_these_names("hidden"),
    ),
    Entry(
        "save_from_both_policies",
        "combinator",
        "whatever either of two policies allows (their union). The combined function insists "
        "on two bools, so an offload policy can join it only where the release hands back the "
        "other policy unchanged for `nothing_saveable` (see `combination_short_circuits()`)",
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

#: Classes that some releases export (see :func:`releases_exporting_classes`): the types of the
#: objects the name-based factories return there. Calling the factory is the documented way.
POLICY_CLASSES = {
    "SaveOnlyTheseNames": "save_only_these_names",
    "SaveAnyNamesButThese": "save_any_names_but_these",
    "SaveAndOffloadOnlyTheseNames": "save_and_offload_only_these_names",
}
CATALOGUE += tuple(
    Entry(
        cls,
        "class",
        f"the same as `{factory}`: its instances are what `{factory}(...)` returns",
        f"type checks (`isinstance`) and reading a policy's fields; build one with `{factory}`",
        next(e.build for e in CATALOGUE if e.name == factory),
        optional=True,
    )
    for cls, factory in POLICY_CLASSES.items()
)

BY_NAME = {entry.name: entry for entry in CATALOGUE}


def _aliases() -> dict[str, str]:
    """name -> earlier catalogue name whose object in ``jax.checkpoint_policies`` it *is*."""
    found: dict[str, str] = {}
    seen: dict[int, str] = {}
    for entry in CATALOGUE:
        obj = getattr(P, entry.name, None)
        if obj is None:
            continue
        if id(obj) in seen:
            found[entry.name] = seen[id(obj)]
        else:
            seen[id(obj)] = entry.name
    return found


#: Decided by identity (``is``) on the installed JAX when this module is imported, not typed in.
ALIASES: dict[str, str] = _aliases()


def classes_behind_factories() -> dict[str, bool]:
    """For each exported policy class: is a factory's output an instance of it?"""
    return {
        cls: isinstance(BY_NAME[factory].build(), getattr(P, cls))
        for cls, factory in POLICY_CLASSES.items()
        if hasattr(P, cls)
    }


def releases_exporting_classes(records: list[dict[str, Any]] | None = None) -> list[str]:
    """The recorded JAX releases (the committed ones by default) whose policies module exported
    them, read from each record's ``facts.policy_names``, oldest first."""
    from examples.reference import releases  # it reads the pages' facts: import late

    records = releases.load_all() if records is None else records
    return [
        r["runinfo"]["jax"]
        for r in records
        if set(POLICY_CLASSES) <= set(r["facts"]["policy_names"])
    ]


def present() -> tuple[Entry, ...]:
    """The catalogue entries the installed JAX has."""
    names = public_policy_names()
    return tuple(entry for entry in CATALOGUE if entry.name in names)


def public_policy_names() -> set[str]:
    """The public names in the installed ``jax.checkpoint_policies``."""
    return {name for name in dir(P) if not name.startswith("_")}


def undocumented_policies() -> set[str]:
    """Public names of the installed JAX that the catalogue does not describe."""
    return public_policy_names() - set(BY_NAME)


def missing_from_jax() -> set[str]:
    """Catalogue entries the installed JAX does not have (optional entries excepted)."""
    return {e.name for e in CATALOGUE if not e.optional} - public_policy_names()


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
        label = r.name if r.name is not None else (r.detail or r.kind)
        if r.on_host:
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


NO_CHECKPOINT = "(no jax.checkpoint)"


def summary() -> list[Row]:
    """One row per catalogue entry (classes aside), after the model without a checkpoint."""
    args = model_inputs()
    rows = [Row(NO_CHECKPOINT, None, *_saved(residuals(None, *args)))]
    for entry in present():
        if entry.kind == "class":
            continue  # the same policies as their factories
        rows.append(Row(entry.name, entry.alias_of, *_saved(residuals(entry.build(), *args))))
    return rows


def _saved(listing: Residuals) -> tuple[str, int, int]:
    computed = listing.excluding_arguments()
    return describe_saved(listing), len(computed), computed.nbytes


def summary_table(rows: list[Row]) -> Table:
    """The rows of :func:`summary`: policy, what is kept, count, bytes."""

    def name(row: Row) -> str:
        text = f"`{row.policy}`" if row.policy in BY_NAME else row.policy
        return text + (f" (= `{row.alias_of}`)" if row.alias_of else "")

    return Table(
        ["policy", "computed values kept", "count", "bytes"],
        [[name(r), r.saved, r.count, format_bytes(r.nbytes)] for r in rows],
        align=["left", "left", "right", "right"],
    )


def relation(value: float, base: float) -> str:
    """``"more than"``, ``"the same as"`` or ``"less than"``: ``value`` against ``base``, exactly.

    For a sentence that a build fills in: "its memory is {relation} that of no checkpoint".
    """
    return "more than" if value > base else "less than" if value < base else "the same as"


# --- facts about the installed JAX that the page states ----------------------------------------


def stacked_residuals(
    policy: Callable[..., Any], stages: int = 2, shared_weights: bool = False
) -> Residuals:
    """Residuals when ``stages`` copies of the checkpointed model run under ``jax.vmap``.

    Each stage has its own ``x``. With ``shared_weights`` all stages use one ``w1`` and ``w2``
    (``in_axes=(None, None, 0)``): ``x @ w1`` maps to a ``dot_general`` of a bigger ``x`` with
    the same ``w1``, still without a batch dimension. Without it each stage has its own weights
    (as pipeline stages do) and both operands are mapped: the product gets a batch dimension (the
    stage), so a policy that keeps only products *without* batch dimensions drops it.
    """
    w1, w2, x = model_inputs()

    def stack(a: jax.Array) -> jax.Array:
        return jnp.stack([a * (1.0 + 0.1 * i) for i in range(stages)])

    body = jax.checkpoint(model, policy=policy)
    in_axes = (None, None, 0) if shared_weights else 0
    weights = (w1, w2) if shared_weights else (stack(w1), stack(w2))

    def loss(w1s: jax.Array, w2s: jax.Array, xs: jax.Array) -> jax.Array:
        return jnp.sum(jax.vmap(body, in_axes=in_axes)(w1s, w2s, xs))

    return saved_residuals(loss, *weights, stack(x))


def excluded_names_honoured(name: str = "hidden") -> bool:
    """Does ``save_anything_except_these_names(name)`` keep less than ``everything_saveable``?

    Its docstring says the named values are excluded. JAX 0.10.2 implements it as a policy that
    answers ``True`` for every primitive, so the names are ignored and nothing is dropped.
    """
    args = model_inputs()
    excluding = residuals(P.save_anything_except_these_names(name), *args)
    everything = residuals(P.everything_saveable, *args)
    return [r.describe() for r in excluding] != [r.describe() for r in everything]


def excluding_names(*names: str) -> Callable[..., bool]:
    """What ``save_anything_except_these_names`` documents, written out: save anything except the
    output of ``checkpoint_name`` under one of ``names``.

    A named value is the output of the primitive ``name`` (an identity), whose ``name``
    parameter holds the tag; refusing it leaves its *input* saveable like any other value.
    """

    def policy(prim: Any, *_: Any, **params: Any) -> bool:
        return not (prim.name == "name" and params.get("name") in names)

    return policy


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
