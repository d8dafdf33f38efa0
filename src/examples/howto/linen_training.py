"""Remat in a Flax linen training step: the code of the how-to guide ``howto/remat-linen``.

A small decoder-style transformer (token embedding, pre-norm attention and MLP blocks with
dropout, a vocabulary head) is trained with cross-entropy, ``jax.value_and_grad`` and an optax
optimizer (optax comes with Flax: Flax depends on it). The blocks are written once, as
:class:`Block`, and the guide lifts that class with Flax's transforms: ``nn.remat`` in a Python
loop of blocks, ``nn.scan(nn.remat(...))`` over stacked blocks, ``nn.remat_scan`` for nested
checkpoints. The models take the lifted class as a field, so a page cell shows the Flax call.
Figures come from XLA's compiled program and from what JAX's autodiff keeps.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.ad_checkpoint import checkpoint_name

from examples.howto.flax_steps import (
    CONFIG,
    DROPOUT,
    VOCAB,
    Batch,
    Measured,
    barrier_facts,
    losses_table,
    make_batch,
    measured_table,
    step_facts,
)
from examples.tools.display import Table
from examples.tools.jaxprs import traced_remat_sites
from examples.tools.measure import compiled_stats
from examples.tools.models import rms_norm
from examples.tools.residuals import saved_residuals

#: Names the page uses from here, defined with the NNX guide's in :mod:`examples.howto.flax_steps`.
__all__ = [
    "CONFIG",
    "Measured",
    "barrier_facts",
    "losses_table",
    "make_batch",
    "measured_table",
    "step_facts",
]

Params = Any

# --- the block --------------------------------------------------------------------------------


class Block(nn.Module):
    """Pre-norm self-attention and MLP, each added back through dropout.

    ``train`` may be given as a field or as a call argument (``nn.merge_param``, the way Flax's
    own ``Dropout`` takes ``deterministic``); it is a Python flag that decides whether dropout
    runs, so a transform that traces it needs it static.
    """

    width: int
    heads: int
    mlp_ratio: int = 4
    dropout: float = DROPOUT
    train: bool | None = None
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool | None = None) -> jax.Array:
        train = nn.merge_param("train", self.train, train)
        dense = dict(dtype=self.dtype, param_dtype=self.dtype)
        b, s, d = x.shape
        qkv = nn.Dense(3 * d, use_bias=False, name="qkv", **dense)(rms_norm(x))
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads) for t in jnp.split(qkv, 3, -1))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // self.heads)
        attended = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)
        attn_out = nn.Dense(d, use_bias=False, name="attn_out", **dense)(attended.reshape(b, s, d))
        attn_out = checkpoint_name(attn_out, "attn_out")
        x = x + nn.Dropout(self.dropout, deterministic=not train)(attn_out)
        pre = nn.Dense(self.mlp_ratio * d, name="mlp_in", **dense)(rms_norm(x))
        pre = checkpoint_name(pre, "mlp_pre")
        hidden = checkpoint_name(jax.nn.gelu(pre), "mlp_hidden")
        mlp_out = nn.Dense(d, name="mlp_out", **dense)(hidden)
        out: jax.Array = x + nn.Dropout(self.dropout, deterministic=not train)(mlp_out)
        return out


class ScanBlock(Block):
    """:class:`Block` in the shape ``nn.scan`` wants: ``(carry, x) -> (carry, y)``."""

    def __call__(  # type: ignore[override]
        self, x: jax.Array, train: bool | None = None
    ) -> tuple[jax.Array, None]:
        return super().__call__(x, train), None


# --- batch normalization under the checkpoint -------------------------------------------------


class BatchNormBlock(nn.Module):
    """A residual layer with batch normalization: its running statistics are updated while
    training (``use_running_average=not train``) and read otherwise."""

    width: int
    momentum: float = 0.9

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        y = nn.Dense(self.width)(x)
        y = nn.BatchNorm(use_running_average=not train, momentum=self.momentum)(y)
        out: jax.Array = x + nn.relu(y)
        return out


def batch_stats_step(block: Callable[..., nn.Module], x: jax.Array) -> tuple[Params, Params]:
    """One training gradient of a :class:`BatchNormBlock` (plain or lifted): the gradient of the
    parameters and the updated ``batch_stats``, from the same initial variables."""
    model = block(x.shape[-1])
    variables = model.init(jax.random.key(0), x, True)

    def loss(params: Params) -> tuple[jax.Array, Params]:
        y, updates = model.apply(
            {"params": params, "batch_stats": variables["batch_stats"]},
            x,
            True,
            mutable=["batch_stats"],
        )
        return jnp.sum(y**2), updates["batch_stats"]

    (_, stats), grads = jax.value_and_grad(loss, has_aux=True)(variables["params"])
    return grads, stats


# --- the models -------------------------------------------------------------------------------


class Transformer(nn.Module):
    """Embedding, ``layers`` blocks applied in a Python loop, norm and vocabulary head.

    ``block`` is the block class: :class:`Block` itself, or ``nn.remat(Block, ...)``.
    """

    layers: int = CONFIG.layers
    width: int = CONFIG.width
    heads: int = CONFIG.heads
    vocab: int = VOCAB
    block: Callable[..., nn.Module] = Block
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array, train: bool) -> jax.Array:
        x = nn.Embed(self.vocab, self.width, param_dtype=self.dtype, name="embed")(tokens)
        for i in range(self.layers):
            x = self.block(self.width, self.heads, dtype=self.dtype, name=f"block_{i}")(x, train)
        return nn.Dense(self.vocab, dtype=self.dtype, param_dtype=self.dtype, name="head")(
            rms_norm(x)
        )


def scan_over(block: Callable[..., nn.Module], layers: int = CONFIG.layers) -> Any:
    """``nn.scan`` of a block class over ``layers`` layers, as the guide writes it.

    Each layer has its own parameters (stacked on a leading axis) and its own dropout keys;
    ``train`` is the same for every layer (``nn.broadcast``).
    """
    return nn.scan(
        block,
        variable_axes={"params": 0},
        split_rngs={"params": True, "dropout": True},
        in_axes=nn.broadcast,
        length=layers,
    )


class ScannedTransformer(nn.Module):
    """:class:`Transformer` with its blocks stacked and applied by ``stack`` (an ``nn.scan``)."""

    stack: Any
    width: int = CONFIG.width
    heads: int = CONFIG.heads
    vocab: int = VOCAB
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, tokens: jax.Array, train: bool) -> jax.Array:
        x = nn.Embed(self.vocab, self.width, param_dtype=self.dtype, name="embed")(tokens)
        x, _ = self.stack(self.width, self.heads, dtype=self.dtype, name="layers")(x, train)
        return nn.Dense(self.vocab, dtype=self.dtype, param_dtype=self.dtype, name="head")(
            rms_norm(x)
        )


# --- sharding the stacked layer axis ----------------------------------------------------------


class ShardedScanLayer(nn.Module):
    """A scanned layer whose kernel is annotated for a mesh: input dimension replicated, output
    dimension over the ``"model"`` axis."""

    width: int

    @nn.compact
    def __call__(self, x: jax.Array, _: Any) -> tuple[jax.Array, None]:
        init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model"))
        return nn.Dense(self.width, kernel_init=init, name="dense")(x), None


def scan_partition_specs(layers: int = 4, width: int = 8, axis_name: str | None = "layers") -> Any:
    """The partition specs of ``nn.scan(nn.remat(ShardedScanLayer))`` with ``metadata_params``:
    the scan's new leading axis is named ``axis_name`` in every annotated parameter
    (``axis_name=None`` leaves ``metadata_params`` out, which Flax refuses at init)."""
    metadata = {} if axis_name is None else {nn.PARTITION_NAME: axis_name}
    stack = nn.scan(
        nn.remat(ShardedScanLayer, prevent_cse=False),
        variable_axes={"params": 0},
        split_rngs={"params": True},
        in_axes=nn.broadcast,
        length=layers,
        metadata_params=metadata,
    )
    x = jnp.zeros((2, width))
    variables = jax.eval_shape(lambda: stack(width).init(jax.random.key(0), x, None))
    return nn.get_partition_spec(variables)["params"]


# --- the training step ------------------------------------------------------------------------


def loss_fn(
    model: nn.Module, params: Params, batch: Batch, dropout_key: jax.Array, train: bool = True
) -> jax.Array:
    """Mean cross-entropy of the next token, with dropout drawn from ``dropout_key``."""
    logits = model.apply({"params": params}, batch["tokens"], train, rngs={"dropout": dropout_key})
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    return jnp.mean(losses)


def make_train_step(
    model: nn.Module, tx: optax.GradientTransformation, donate: bool = False
) -> Callable[..., Any]:
    """One jitted training step: loss, ``jax.value_and_grad``, optimizer update. ``donate``:
    XLA may write the new parameters and optimizer state over the old ones."""

    def train_step(
        params: Params, opt_state: Any, batch: Batch, dropout_key: jax.Array
    ) -> tuple[Params, Any, jax.Array]:
        loss, grads = jax.value_and_grad(loss_fn, argnums=1)(model, params, batch, dropout_key)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.jit(train_step, donate_argnums=(0, 1) if donate else ())


def init_params(model: nn.Module, batch: Batch, seed: int = 0) -> Params:
    """The model's parameters (the init pass runs without dropout)."""
    return model.init(jax.random.key(seed), batch["tokens"], False)["params"]


def param_shapes(model: nn.Module, batch: Batch) -> Params:
    """The shapes :func:`init_params` would give, traced only (``jax.eval_shape``)."""
    # `.shape` of each ShapeDtypeStruct: `jnp.shape` of one is deprecated (jax 0.5.3 warns).
    return jax.tree.map(lambda a: a.shape, jax.eval_shape(lambda: init_params(model, batch)))


#: The optimizer of the guide's training step.
OPTIMIZER = optax.adamw(1e-3)


def dropout_key(seed: int = 1) -> jax.Array:
    """A raw ``uint32[2]`` key (``jax.random.PRNGKey``), which Flax accepts for its streams."""
    return jax.random.PRNGKey(seed)


# --- measuring --------------------------------------------------------------------------------


def measure(name: str, model: nn.Module, compile: bool = True) -> Measured:
    """List what the gradient of ``model``'s loss keeps, and compile its training step.

    Both work from shapes alone (``jax.eval_shape``), so no parameter is allocated.
    """
    batch, key, tx = make_batch(), dropout_key(), OPTIMIZER
    params = jax.eval_shape(lambda: init_params(model, batch))
    kept = saved_residuals(lambda p: loss_fn(model, p, batch, key), params)
    step = None
    if compile:
        opt_state = jax.eval_shape(tx.init, params)
        step = compiled_stats(make_train_step(model, tx), params, opt_state, batch, key)
    return Measured(name, step, kept.excluding_arguments().nbytes)


# --- methods= ---------------------------------------------------------------------------------


class Coder(nn.Module):
    """Two methods besides ``__call__``, to show which ones ``nn.remat`` lifts."""

    width: int = 16

    def setup(self) -> None:
        self.enc = nn.Dense(self.width)
        self.dec = nn.Dense(self.width)
        self.drop = nn.Dropout(0.5)

    def encode(self, x: jax.Array, train: bool) -> jax.Array:
        h: jax.Array = self.drop(jnp.tanh(self.enc(x)), deterministic=not train)
        return h

    def decode(self, z: jax.Array, train: bool) -> jax.Array:
        return jnp.tanh(self.dec(z))

    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        return self.decode(self.encode(x, train), train)


CODER_METHODS = ("__call__", "encode", "decode")


def checkpoints_per_method(coder_class: Any) -> dict[str, int]:
    """How many checkpoints JAX traces when each method of ``coder_class`` runs."""
    x = jnp.ones((2, 16))
    variables = Coder().init(jax.random.key(0), x, False)

    def count(method: str) -> int:
        apply = lambda v: coder_class().apply(v, x, False, method=method)
        return len(traced_remat_sites(apply, variables))

    return {method: count(method) for method in CODER_METHODS}


def methods_table(variants: dict[str, Any]) -> Table:
    """Checkpoints traced per method, one row per lifted class."""
    return Table(
        ["lifted class", *(f"`{m}`" for m in CODER_METHODS)],
        [(f"`{name}`", *checkpoints_per_method(cls).values()) for name, cls in variants.items()],
    )


# --- dropout under recomputation -------------------------------------------------------------


def train_side_by_side(
    models: dict[str, nn.Module], steps: int = 3, batch: Batch | None = None
) -> dict[str, list[float]]:
    """Train each model for ``steps`` steps from the same parameters and dropout keys.

    The models must share one parameter structure (a model and its checkpointed twin do). Returns
    each model's loss at every step.
    """
    batch = make_batch() if batch is None else batch
    first = next(iter(models.values()))
    start = jax.jit(init_params, static_argnums=0)(first, batch)
    tx = OPTIMIZER
    losses: dict[str, list[float]] = {}
    for name, model in models.items():
        step = make_train_step(model, tx)
        params, opt_state = start, tx.init(start)
        losses[name] = []
        for i in range(steps):
            params, opt_state, loss = step(params, opt_state, batch, dropout_key(100 + i))
            losses[name].append(float(loss))
    return losses
