"""Remat in a Flax NNX training step: the code of the how-to guide ``howto/remat-nnx``.

The transformer of the linen guide (:mod:`examples.howto.linen_training`), written as NNX
modules: pre-norm attention and MLP blocks with dropout whose random streams live in the modules,
trained with ``nnx.jit``, ``nnx.value_and_grad`` and ``nnx.Optimizer`` (over an optax transform;
optax comes with Flax). The guide checkpoints it three ways:

- ``nnx.remat(Block.__call__)`` on each block's call, in a Python loop of blocks;
- blocks created by ``nnx.vmap`` and applied by ``nnx.scan`` over ``nnx.remat``;
- the pattern of large NNX code bases: ``nnx.split`` the stacked blocks, ``jax.lax.scan`` a
  ``jax.checkpoint`` of a pure function that merges one layer, ``nnx.update`` the model after.

Figures come from XLA's compiled program (:func:`examples.tools.measure.compiled_stats`) of the
training step, traced from abstract shapes (``nnx.eval_shape``), so no model is allocated to
measure it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

from examples.howto.flax_steps import (
    CONFIG,
    DROPOUT,
    VOCAB,
    Batch,
    Measured,
    barrier_facts,
    make_batch,
    measured_table,
    step_facts,
)
from examples.tools.display import Table
from examples.tools.measure import Timing, compiled_stats, time_interleaved
from examples.tools.models import Config, rms_norm

__all__ = ["CONFIG", "VOCAB", "barrier_facts", "make_batch", "measured_table", "step_facts"]

# --- the block and the models -----------------------------------------------------------------


class Block(nnx.Module):
    """Pre-norm self-attention and MLP, each added back through dropout.

    The dropout layer holds its own random stream (a key and a counter, ``nnx.RngState``), forked
    from the ``rngs`` the block is built with; ``model.eval()`` switches it off.
    """

    def __init__(
        self,
        width: int,
        heads: int,
        *,
        mlp_ratio: int = 4,
        dtype: Any = jnp.float32,
        dropout: float = DROPOUT,
        rngs: nnx.Rngs,
    ) -> None:
        linear = partial(nnx.Linear, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.heads = heads
        self.qkv = linear(width, 3 * width, use_bias=False)
        self.attn_out = linear(width, width, use_bias=False)
        self.mlp_in = linear(width, mlp_ratio * width)
        self.mlp_out = linear(mlp_ratio * width, width)
        self.dropout = nnx.Dropout(dropout, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        b, s, d = x.shape
        qkv = jnp.split(self.qkv(rms_norm(x)), 3, axis=-1)
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads) for t in qkv)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // self.heads)
        attended = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)
        attn_out = checkpoint_name(self.attn_out(attended.reshape(b, s, d)), "attn_out")
        x = x + self.dropout(attn_out)
        hidden = checkpoint_name(jax.nn.gelu(self.mlp_in(rms_norm(x))), "mlp_hidden")
        out: jax.Array = x + self.dropout(self.mlp_out(hidden))
        return out


BlockCall = Callable[[Block, jax.Array], jax.Array]


class CheckpointedBlock(Block):
    """:class:`Block` with its call checkpointed where it is defined: ``nnx.remat`` as a
    decorator on the method, with a policy."""

    @nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def __call__(self, x: jax.Array) -> jax.Array:
        return Block.__call__(self, x)


class Transformer(nnx.Module):
    """Embedding, a Python loop of blocks, norm and vocabulary head.

    ``block_call(block, x)`` applies one block: ``Block.__call__`` itself, or a checkpointed
    version of it such as ``nnx.remat(Block.__call__)``.
    """

    def __init__(
        self,
        cfg: Config = CONFIG,
        *,
        block_call: BlockCall = Block.__call__,
        dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ) -> None:
        self.embed = nnx.Embed(VOCAB, cfg.width, param_dtype=dtype, rngs=rngs)
        self.blocks = nnx.List(
            [Block(cfg.width, cfg.heads, dtype=dtype, rngs=rngs) for _ in range(cfg.layers)]
        )
        self.head = nnx.Linear(cfg.width, VOCAB, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.block_call = block_call

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = self.embed(tokens)
        for block in self.blocks:
            x = self.block_call(block, x)
        out: jax.Array = self.head(rms_norm(x))
        return out


class ScannedTransformer(nnx.Module):
    """The blocks created at once by ``nnx.vmap`` (stacked), applied by ``nnx.scan``.

    ``body(block, x)`` is what the scan runs per layer (``Block.__call__``, or an ``nnx.remat``
    of it); ``in_axes`` tells ``nnx.scan`` what to do with the carry and with the blocks' state.
    """

    def __init__(
        self,
        cfg: Config = CONFIG,
        *,
        body: BlockCall = Block.__call__,
        in_axes: tuple[Any, ...] = (nnx.Carry, 0),
        dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ) -> None:
        self.embed = nnx.Embed(VOCAB, cfg.width, param_dtype=dtype, rngs=rngs)

        @nnx.split_rngs(splits=cfg.layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_blocks(rngs: nnx.Rngs) -> Block:
            return Block(cfg.width, cfg.heads, dtype=dtype, rngs=rngs)

        self.blocks = make_blocks(rngs)
        self.head = nnx.Linear(cfg.width, VOCAB, dtype=dtype, param_dtype=dtype, rngs=rngs)
        self.body = body
        self.in_axes = in_axes

    def __call__(self, tokens: jax.Array) -> jax.Array:
        body = self.body  # a local: the scanned function must not close over `self`

        @nnx.scan(in_axes=self.in_axes, out_axes=nnx.Carry)
        def forward(x: jax.Array, block: Block) -> jax.Array:
            return body(block, x)

        out: jax.Array = self.head(rms_norm(forward(self.embed(tokens), self.blocks)))
        return out


#: The Flax release that added ``graph`` to ``nnx.remat`` (read from Flax's source: 0.12.4's
#: ``nnx.remat`` has neither switch, 0.12.5 has ``graph``, 0.12.6 adds ``graph_updates``).
GRAPH_SINCE = "0.12.5"
#: The Flax release that added ``graph_updates`` to ``nnx.remat`` and the other NNX transforms;
#: the guide's recommended spelling needs it. The split pattern (:class:`SplitScannedTransformer`)
#: does not.
GRAPH_UPDATES_SINCE = "0.12.6"
#: The Flax release without ``nnx.Remat``, the module-class lift (read from Flax's source: 0.10.5
#: exports it, 0.10.6 does not).
REMAT_CLASS_REMOVED_IN = "0.10.6"
#: The Flax release whose ``nnx.jit`` returns an object with ``lower`` (``JitWrapped``, read from
#: Flax's source: 0.10.6 returns a plain function).
JIT_LOWER_SINCE = "0.10.7"
#: The Flax release whose NNX transforms first refuse a bound method ("nnx.remat does not support
#: bound methods", ``flax/nnx/transforms/transforms.py``); before it one is accepted.
BOUND_METHOD_CHECK_SINCE = "0.12.1"


class SplitScannedTransformer(ScannedTransformer):
    """The same model, its layers applied the way large NNX code bases do it.

    ``nnx.split`` the stacked blocks into a graph definition and state, ``jax.lax.scan`` a
    ``jax.checkpoint`` of a pure function that rebuilds one layer with ``nnx.merge``, calls it,
    and returns the part of its state that ``returns`` selects; ``nnx.update`` writes that back.
    ``returns=nnx.RngState`` returns the random streams' state: their counters, the only state
    a forward pass changes, and their keys, which it does not change (``nnx.RngCount`` would be
    the counters alone); ``returns=...`` returns the whole layer state, parameters included.
    """

    def __init__(
        self,
        cfg: Config = CONFIG,
        *,
        returns: Any = nnx.RngState,
        policy: Any = None,
        dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ) -> None:
        super().__init__(cfg, dtype=dtype, rngs=rngs)
        self.returns = returns
        self.policy = policy

    def __call__(self, tokens: jax.Array) -> jax.Array:
        graphdef, *states = nnx.split(self.blocks, nnx.Param, ...)
        returns = self.returns

        def layer(x: jax.Array, state: tuple[Any, Any]) -> tuple[jax.Array, Any]:
            block = nnx.merge(graphdef, *state)
            return block(x), nnx.state(block, returns)

        layer = jax.checkpoint(layer, policy=self.policy, prevent_cse=False)
        x, new_state = jax.lax.scan(layer, self.embed(tokens), tuple(states))
        nnx.update(self.blocks, new_state)
        out: jax.Array = self.head(rms_norm(x))
        return out


# --- a flag at call time -----------------------------------------------------------------------


class FlagLayer(nnx.Module):
    """A residual MLP layer whose dropout a keyword-only Python flag switches, the way many models
    ported from linen take ``train`` (or ``deterministic``) at call time."""

    def __init__(self, width: int, *, rngs: nnx.Rngs) -> None:
        self.linear = nnx.Linear(width, width, rngs=rngs)
        self.dropout = nnx.Dropout(DROPOUT, rngs=rngs)

    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        out: jax.Array = x + self.dropout(jax.nn.gelu(self.linear(x)), deterministic=not train)
        return out


def apply_layer(layer: FlagLayer, x: jax.Array, train: bool) -> jax.Array:
    """:class:`FlagLayer`'s call with the flag as a positional argument, which ``static_argnums``
    can name (``nnx.remat`` resolves no keyword argument to a position)."""
    return layer(x, train=train)


def stacked_flag_layers(layers: int, width: int, *, rngs: nnx.Rngs) -> FlagLayer:
    """``layers`` :class:`FlagLayer` s created at once, stacked (as :class:`ScannedTransformer`'s
    blocks are)."""

    @nnx.split_rngs(splits=layers)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def make(rngs: nnx.Rngs) -> FlagLayer:
        return FlagLayer(width, rngs=rngs)

    return make(rngs)


def scan_flag_layers(stack: FlagLayer, x: jax.Array, train: bool) -> jax.Array:
    """Apply stacked :class:`FlagLayer` s with ``nnx.scan`` over ``nnx.remat``, the flag closed
    over: ``nnx.scan`` traces every argument it is given, ``None`` in ``in_axes`` included, so a
    flag passed through the scan reaches the layer as a tracer whatever ``static_argnums`` says."""

    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    @nnx.remat(prevent_cse=False, graph_updates=False)
    def forward(x: jax.Array, layer: FlagLayer) -> jax.Array:
        return layer(x, train=train)  # `train` is a Python bool of the enclosing call

    out: jax.Array = forward(x, stack)
    return out


# --- sharding the stacked layer axis ----------------------------------------------------------


class ShardedLayer(nnx.Module):
    """One layer whose kernel is annotated for a mesh: input dimension replicated, output
    dimension over the ``"model"`` axis."""

    def __init__(self, width: int, *, rngs: nnx.Rngs) -> None:
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
        self.linear = nnx.Linear(width, width, kernel_init=init, rngs=rngs)


def stacked_partition_specs(layers: int = 4, width: int = 8) -> dict[str, Any]:
    """The partition specs of ``layers`` stacked :class:`ShardedLayer`, created by ``nnx.vmap``
    with ``transform_metadata``: the new leading axis is named ``"layers"`` in every annotated
    variable. Shapes only (``nnx.eval_shape``), under a one-device mesh with both axis names."""

    @nnx.split_rngs(splits=layers)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
    def make(rngs: nnx.Rngs) -> ShardedLayer:
        return ShardedLayer(width, rngs=rngs)

    # Explicit axes, the default from jax 0.9 on (jax 0.8 warns that its default changes).
    explicit = (jax.sharding.AxisType.Explicit,) * 2
    with jax.set_mesh(jax.make_mesh((1, 1), ("layers", "model"), axis_types=explicit)):
        stacked = nnx.eval_shape(lambda: make(nnx.Rngs(0)))
    specs = nnx.get_partition_spec(nnx.state(stacked))
    is_spec = lambda x: isinstance(x, jax.sharding.PartitionSpec)
    flat = jax.tree_util.tree_leaves_with_path(specs, is_leaf=is_spec)

    def names(path: Any) -> list[str]:
        return [str(getattr(k, "key", k)) for k in path]

    return {"/".join(n for n in names(path) if n != ".value"): spec for path, spec in flat}


# --- the training step ------------------------------------------------------------------------


def loss_fn(model: nnx.Module, batch: Batch) -> jax.Array:
    """Mean cross-entropy of the next token; dropout draws from the model's own streams."""
    logits = model(batch["tokens"])
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, batch["targets"])
    return jnp.mean(losses)


def step(model: nnx.Module, optimizer: nnx.Optimizer[Any], batch: Batch) -> jax.Array:
    """Loss, ``nnx.value_and_grad``, optimizer update: the body of :data:`train_step`."""
    loss, grads = nnx.value_and_grad(loss_fn)(model, batch)
    optimizer.update(model, grads)
    out: jax.Array = loss
    return out


#: The training step, compiled: ``nnx.jit`` propagates the updates of the model and optimizer.
train_step = nnx.jit(step)


def optimizer_for(model: nnx.Module) -> nnx.Optimizer[Any]:
    return nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)


# --- measuring --------------------------------------------------------------------------------


def abstract(make_model: Callable[[], nnx.Module]) -> tuple[nnx.Module, nnx.Optimizer[Any]]:
    """A model and its optimizer with shapes and no arrays (``nnx.eval_shape``)."""
    return nnx.eval_shape(lambda: (lambda m: (m, optimizer_for(m)))(make_model()))


def pure_step(model: nnx.Module, optimizer: nnx.Optimizer[Any]) -> tuple[Any, Callable[..., Any]]:
    """``(state, f)`` with ``f(state, batch) -> (loss, new state)``: :func:`step` as ``nnx.jit``
    compiles it, as a function of arrays that :func:`examples.tools.measure.compiled_stats` can
    take."""
    graphdef, state = nnx.split((model, optimizer))

    def f(state: Any, batch: Batch) -> tuple[jax.Array, Any]:
        model, optimizer = nnx.merge(graphdef, state, copy=True)
        loss = step(model, optimizer, batch)
        return loss, nnx.state((model, optimizer))

    return state, f


def measure(name: str, make_model: Callable[[], nnx.Module]) -> Measured:
    """Compile the training step of the model ``make_model()`` builds, from shapes alone.

    The record and its table are the linen guide's (``Measured``, ``measured_table``), without
    the residuals: NNX keeps its random keys as typed keys, which the site's residual listing
    does not read.
    """
    state, f = pure_step(*abstract(make_model))
    return Measured(name, compiled_stats(f, state, make_batch()))


# --- tracing and compiling time ---------------------------------------------------------------


def lowering_times(
    makers: Mapping[str, Callable[[], nnx.Module]], repeats: int = 7
) -> dict[str, Timing]:
    """Seconds to trace each model's training step and lower it to XLA's input, the models in
    turns (:func:`~examples.tools.measure.time_interleaved`): each call a fresh ``nnx.jit``,
    after ``jax.clear_caches()`` (outside the time), so that no cache of NNX's or JAX's answers
    and every figure is a first trace."""
    abstracts = {name: abstract(make) for name, make in makers.items()}
    batch = make_batch()
    fns = {
        name: (lambda m=model, o=optimizer: nnx.jit(step).lower(m, o, batch))
        for name, (model, optimizer) in abstracts.items()
    }
    return time_interleaved(fns, repeats=repeats, before_each=jax.clear_caches)


def timing_table(timings: dict[str, Timing]) -> Table:
    first = next(iter(timings.values()))
    rows = [
        (f"`{name}`", str(t), "—" if t is first else t.compare(first))
        for name, t in timings.items()
    ]
    return Table(["model", "trace and lower", "against the first"], rows)
