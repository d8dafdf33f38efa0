"""The code of the Equinox section of "The same ideas elsewhere": what :func:`jax.checkpoint`
refuses in an Equinox model, Equinox's own wrapper (``equinox.filter_checkpoint``), and the
checkpointed scan over stacked Equinox layers.

Equinox is not a dependency of the package: the page installs it where it is missing, and
:func:`require_equinox` says how where it is not installed. Facts about Equinox are read from its
source (``equinox/_ad.py``, ``_CheckpointWrapper``; ``equinox/_module/_module.py``,
``_warn_jax_transformed_function``) and tested on the installed release.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.tools.display import Table, format_bytes
from examples.tools.measure import compiled_stats
from examples.tools.residuals import saved_residuals

#: Equinox added ``filter_checkpoint`` in this release (patrick-kidger/equinox PR 497, after
#: issue 469 reported that ``jax.checkpoint`` refuses a model's non-array leaves).
FILTER_CHECKPOINT_SINCE = "0.11.0"

#: What a reader without Equinox runs.
INSTALL = "pip install equinox"


def equinox_version() -> str:
    """The installed Equinox release."""
    return importlib.metadata.version("equinox")


# --- A model whose pytree holds more than arrays ----------------------------------------------


def make_mlp(key: jax.Array, *, size: int = 16, width: int = 32, depth: int = 2) -> eqx.nn.MLP:
    """Equinox's MLP: its activation functions are leaves of its pytree, beside the weights."""
    return eqx.nn.MLP(size, size, width, depth, key=key)


def inputs(key: jax.Array, *, batch: int = 8, size: int = 16) -> jax.Array:
    """A batch of inputs for :func:`make_mlp` and :func:`make_blocks`."""
    return jax.random.normal(key, (batch, size))


def loss(model: Callable[[jax.Array], jax.Array], x: jax.Array) -> jax.Array:
    """The mean square of the model's output over a batch (the model takes one example)."""
    return jnp.mean(jax.vmap(model)(x) ** 2)


def describe_leaf(leaf: Any) -> str:
    """An array as its type (``f32[32,16]``); anything else as its Python type and value."""
    if eqx.is_array(leaf):
        return str(jax.typeof(leaf)) if hasattr(jax, "typeof") else f"{leaf.dtype}{leaf.shape}"
    name = getattr(leaf, "__name__", None) or repr(leaf)
    return f"{type(leaf).__name__} {name}"


def leaf_table(model: Any) -> Table:
    """Each leaf of ``model``'s pytree, and whether ``jax.checkpoint`` can take it as an input."""
    rows = [
        (jax.tree_util.keystr(path), describe_leaf(leaf), "yes" if eqx.is_array(leaf) else "no")
        for path, leaf in jax.tree_util.tree_leaves_with_path(model)
    ]
    return Table(["leaf", "what it is", "an array"], rows)


def non_array_leaves(model: Any) -> list[Any]:
    """The leaves of ``model`` that are not arrays (what ``jax.checkpoint`` refuses)."""
    return [leaf for leaf in jax.tree_util.tree_leaves(model) if not eqx.is_array(leaf)]


def checkpointed_loss(policy: Any = None, *, prevent_cse: bool = True) -> Callable[..., jax.Array]:
    """:func:`loss` under ``eqx.filter_checkpoint``, which takes the model as it is."""
    return eqx.filter_checkpoint(loss, policy=policy, prevent_cse=prevent_cse)


# --- A layer checkpointed where it is defined -------------------------------------------------


class Block(eqx.Module):
    """A residual MLP block: its activation is a field, a non-array leaf of its pytree."""

    up: eqx.nn.Linear
    down: eqx.nn.Linear
    activation: Callable[[jax.Array], jax.Array]

    def __init__(
        self,
        size: int,
        width: int,
        *,
        key: jax.Array,
        activation: Callable[[jax.Array], jax.Array] = jax.nn.gelu,
    ) -> None:
        k1, k2 = jax.random.split(key)
        self.up = eqx.nn.Linear(size, width, key=k1)
        self.down = eqx.nn.Linear(width, size, key=k2)
        self.activation = activation

    def __call__(self, x: jax.Array) -> jax.Array:
        hidden = checkpoint_name(self.up(x), "up_proj")
        return x + self.down(self.activation(hidden))


class CheckpointedBlock(Block):
    """:class:`Block`, its call checkpointed by Equinox's wrapper (``self`` goes through it)."""

    @eqx.filter_checkpoint
    def __call__(self, x: jax.Array) -> jax.Array:
        return super().__call__(x)


class JaxCheckpointedBlock(Block):
    """:class:`Block`, its call under ``jax.checkpoint``: refused, ``self`` holds a function."""

    @jax.checkpoint
    def __call__(self, x: jax.Array) -> jax.Array:
        return super().__call__(x)


def wrap_a_layer_in_a_field(key: jax.Array) -> Any:
    """A module whose field is ``jax.checkpoint(eqx.nn.Linear(...))``: the mistake Equinox warns
    about when the class is instantiated (``_warn_jax_transformed_function``)."""

    class Wrapped(eqx.Module):
        linear: Callable[[jax.Array], jax.Array]

        def __init__(self, key: jax.Array) -> None:
            self.linear = jax.checkpoint(eqx.nn.Linear(16, 16, key=key))

        def __call__(self, x: jax.Array) -> jax.Array:
            return self.linear(x)

    return Wrapped(key)


# --- Stacked layers, scanned -------------------------------------------------------------------


def make_blocks(key: jax.Array, layers: int, *, size: int = 16, width: int = 64) -> Block:
    """``layers`` blocks stacked along a leading axis (``eqx.filter_vmap`` over their keys): one
    :class:`Block` whose arrays have a layer axis and whose activation is shared."""
    stacked: Block = eqx.filter_vmap(lambda k: Block(size, width, key=k))(
        jax.random.split(key, layers)
    )
    return stacked


def scan_loss(
    *, remat: bool, policy: Any = None, prevent_cse: bool = False
) -> Callable[[Block, jax.Array], jax.Array]:
    """:func:`loss` of the stacked blocks run by ``jax.lax.scan``, each step under
    ``jax.checkpoint`` where ``remat``.

    ``eqx.partition`` splits the stack into its arrays, which the scan slices per layer, and the
    rest (the activation), which the step closes over: nothing but arrays crosses the
    checkpoint, so plain ``jax.checkpoint`` takes it. ``prevent_cse`` is off, as inside any scan.
    """

    def run(blocks: Block, x: jax.Array) -> jax.Array:
        params, static = eqx.partition(blocks, eqx.is_array)

        def step(h: jax.Array, layer: Any) -> tuple[jax.Array, None]:
            block: Block = eqx.combine(layer, static)
            return jax.vmap(block)(h), None

        if remat:
            step = jax.checkpoint(step, policy=policy, prevent_cse=prevent_cse)
        out, _ = jax.lax.scan(step, x, params)
        return jnp.mean(out**2)

    return run


def internal_scan_loss(checkpoints: int) -> Callable[[Block, jax.Array], jax.Array]:
    """:func:`scan_loss` run by ``equinox.internal.scan(kind="checkpointed")``: Equinox's
    internal loop that keeps ``checkpoints`` carries and recomputes the steps between them
    (online binomial checkpointing, ``equinox/internal/_loop/checkpointed.py``)."""
    import equinox.internal as eqxi

    def run(blocks: Block, x: jax.Array) -> jax.Array:
        params, static = eqx.partition(blocks, eqx.is_array)

        def step(h: jax.Array, layer: Any) -> tuple[jax.Array, None]:
            block: Block = eqx.combine(layer, static)
            return jax.vmap(block)(h), None

        out, _ = eqxi.scan(step, x, params, kind="checkpointed", checkpoints=checkpoints)
        return jnp.mean(out**2)

    return run


#: The scans :func:`scan_table` compares: (label, remat, policy).
SCAN_VARIANTS: tuple[tuple[str, bool, Any], ...] = (
    ("no checkpoint", False, None),
    ("jax.checkpoint(step)", True, None),
    (
        'jax.checkpoint(step, policy=save_only_these_names("up_proj"))',
        True,
        jax.checkpoint_policies.save_only_these_names("up_proj"),
    ),
)


def scan_table(blocks: Block, x: jax.Array) -> Table:
    """For each of :data:`SCAN_VARIANTS`: what the forward pass keeps, and the compiled
    gradient's temporary memory."""
    rows = []
    for label, remat, policy in SCAN_VARIANTS:
        f, params = on_arrays(scan_loss(remat=remat, policy=policy), blocks)
        kept = saved_residuals(f, params, x).excluding_arguments()
        temp = compiled_stats(jax.jit(jax.grad(f)), params, x).temp_bytes
        rows.append((f"`{label}`", len(kept), format_bytes(kept.nbytes), format_bytes(temp)))
    return Table(["the step", "values kept", "their bytes", "compiled temporaries"], rows)


def on_arrays(f: Callable[..., jax.Array], model: Any) -> tuple[Callable[..., jax.Array], Any]:
    """``f(model, *args)`` as a function of the model's arrays, and those arrays: what JAX's own
    tools (``jax.jit``, ``print_saved_residuals``), which take arrays only, are given. The rest of
    the model is closed over (``eqx.partition`` and ``eqx.combine``)."""
    params, static = eqx.partition(model, eqx.is_array)
    return (lambda p, *args: f(eqx.combine(p, static), *args)), params


def array_grads(f: Callable[..., jax.Array], model: Any, x: jax.Array) -> Any:
    """The gradient of ``f(model, x)`` with respect to the model's arrays (``eqx.filter_grad``)."""
    return eqx.filter_grad(f)(model, x)


def largest_difference(a: Any, b: Any) -> float:
    """The largest absolute difference between the arrays of two gradients of one model."""
    leaves = zip(
        jax.tree_util.tree_leaves(eqx.filter(a, eqx.is_array)),
        jax.tree_util.tree_leaves(eqx.filter(b, eqx.is_array)),
        strict=True,
    )
    return max(float(jnp.max(jnp.abs(u - v))) for u, v in leaves)
