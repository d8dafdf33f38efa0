"""How-to: remat a transformer trained with ``jax.lax.scan`` over its layers (plain JAX).

The code of ``docs/howto/scan-transformer.md``, in the order of the page: the training step
(loss, ``jax.value_and_grad``, an optax update), the places a ``jax.checkpoint`` can go, and the
knobs that matter under a scan (the policy, ``prevent_cse``, ``unroll``). The model is the shared
pre-norm transformer of :mod:`examples.tools.models` (its sizes and weights), with the block of
:func:`examples.tools.models.named_block`, which names the values worth keeping.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import optax

from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.measure import (
    MIN_REPEATS,
    CompiledStats,
    Timing,
    compile_for_analysis,
    compiled_stats,
    persistent_cache_off,
    time_call,
)
from examples.tools.measure import time_interleaved as time_in_turns
from examples.tools.models import Config, init_inputs, init_params
from examples.tools.models import named_block as block

P = jax.checkpoint_policies

#: The size the page measures: six layers, 2 sequences of 128 tokens, width 128, 4 heads.
CFG = Config(layers=6, batch=2, seq=128, width=128, heads=4)

# --- the training step ---------------------------------------------------------------------------


def forward(
    layer: Callable[[jax.Array, Any], jax.Array], params: Any, x: jax.Array, unroll: int = 1
) -> jax.Array:
    """Apply ``layer(h, layer_params)`` once per layer of the stacked ``params``."""

    def body(h: jax.Array, layer_params: Any) -> tuple[jax.Array, None]:
        return layer(h, layer_params), None

    h: jax.Array
    h, _ = jax.lax.scan(body, x, params, unroll=unroll)
    return h


def make_loss(
    layer: Callable[[jax.Array, Any], jax.Array], unroll: int = 1
) -> Callable[[Any, jax.Array, jax.Array], jax.Array]:
    """``loss(params, x, y)``: mean squared error of the stack's output against ``y``."""

    def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.mean((forward(layer, params, x, unroll) - y) ** 2)

    return loss


def make_train_step(
    loss: Callable[..., jax.Array], optimizer: optax.GradientTransformation
) -> Callable[..., tuple[Any, Any, jax.Array]]:
    """One step of training: the loss and its gradient, then the optimizer's update."""

    def train_step(
        params: Any, opt_state: Any, x: jax.Array, y: jax.Array
    ) -> tuple[Any, Any, jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return train_step


def optimizer() -> optax.GradientTransformation:
    return optax.adam(1e-3)


def init_state(cfg: Config = CFG) -> tuple[Any, Any, jax.Array, jax.Array]:
    """Parameters, Adam's state, a batch of inputs and its regression targets."""
    params = init_params(cfg)
    x = init_inputs(cfg)
    y = jax.random.normal(jax.random.key(2), x.shape)
    return params, optimizer().init(params), x, y


# --- dropout keys and a Python flag inside the scanned block --------------------------------------


def dropout_block(
    h: jax.Array, p: Any, key: jax.Array, train: bool, *, heads: int, rate: float = 0.1
) -> jax.Array:
    """The block with dropout, drawn from ``key``, on what it adds to ``h``. ``train`` is a
    Python flag (it decides whether dropout runs), so a checkpoint must treat it as static."""
    out = block(h, p, heads=heads)
    if not train:
        return out
    keep = jax.random.bernoulli(key, 1.0 - rate, out.shape)
    return h + jnp.where(keep, (out - h) / (1.0 - rate), 0.0)


def make_dropout_loss(
    layer: Callable[..., jax.Array], train: bool = True
) -> Callable[..., jax.Array]:
    """``loss(params, x, y, key)``: one key per layer, split from ``key`` and scanned over with
    that layer's weights, so a layer's recomputation draws its mask from the same key."""

    def loss(params: Any, x: jax.Array, y: jax.Array, key: jax.Array) -> jax.Array:
        keys = jax.random.split(key, jax.tree.leaves(params)[0].shape[0])

        def body(h: jax.Array, xs: tuple[Any, jax.Array]) -> tuple[jax.Array, None]:
            return layer(h, xs[0], xs[1], train), None

        h, _ = jax.lax.scan(body, x, (params, keys))
        return jnp.mean((h - y) ** 2)

    return loss


def largest_difference(a: Any, b: Any) -> float:
    """The largest absolute difference between two pytrees of arrays of one structure."""
    pairs = zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in pairs)


# --- where the checkpoint goes, and its knobs ----------------------------------------------------

Where = Literal["nowhere", "whole loss", "scanned block"]


@dataclasses.dataclass(frozen=True)
class Setup:
    """One way of putting (or not putting) ``jax.checkpoint`` into the training step."""

    label: str
    where: Where = "scanned block"
    policy: Callable[..., Any] | None = None  #: ``None``: JAX's default, keep nothing
    prevent_cse: bool = False
    unroll: int | bool = 1


def layer_fn(cfg: Config, setup: Setup) -> Callable[[jax.Array, Any], jax.Array]:
    """The block for one layer, checkpointed if ``setup`` puts the checkpoint there."""
    layer: Callable[[jax.Array, Any], jax.Array] = functools.partial(block, heads=cfg.heads)
    if setup.where == "scanned block":
        layer = jax.checkpoint(layer, policy=setup.policy, prevent_cse=setup.prevent_cse)
    return layer


def loss_fn(cfg: Config, setup: Setup) -> Callable[..., jax.Array]:
    loss: Callable[..., jax.Array] = make_loss(layer_fn(cfg, setup), setup.unroll)
    if setup.where == "whole loss":
        loss = jax.checkpoint(loss, policy=setup.policy, prevent_cse=setup.prevent_cse)
    return loss


def step_fn(cfg: Config, setup: Setup) -> Callable[..., Any]:
    return make_train_step(loss_fn(cfg, setup), optimizer())


NO_REMAT = Setup("no remat", where="nowhere")
#: The names worth keeping in this block: the two products whose inputs the backward pass needs.
KEEP = P.save_only_these_names("qkv", "mlp_pre")

#: Every setup the page measures, each compiled once; the page's tables pick from them.
SETUPS = (
    NO_REMAT,
    Setup("checkpoint the whole loss", where="whole loss", prevent_cse=True),
    Setup("nothing_saveable", policy=P.nothing_saveable),
    Setup('save_only_these_names("qkv", "mlp_pre")', policy=KEEP),
    Setup("dots_with_no_batch_dims_saveable", policy=P.dots_with_no_batch_dims_saveable),
    Setup("nothing_saveable, prevent_cse=True", policy=P.nothing_saveable, prevent_cse=True),
    Setup("nothing_saveable, unroll=2", policy=P.nothing_saveable, unroll=2),
    Setup("nothing_saveable, unroll=True", policy=P.nothing_saveable, unroll=True),
    Setup(
        "nothing_saveable, unroll=2, prevent_cse=True",
        policy=P.nothing_saveable,
        unroll=2,
        prevent_cse=True,
    ),
    Setup(
        "nothing_saveable, unroll=True, prevent_cse=True",
        policy=P.nothing_saveable,
        unroll=True,
        prevent_cse=True,
    ),
    Setup("no remat, unroll=True", where="nowhere", unroll=True),
)
BY_LABEL = {setup.label: setup for setup in SETUPS}


# --- measuring -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Measured:
    setup: Setup
    stats: CompiledStats
    time: Timing | None


def measure(
    setups: Sequence[Setup], cfg: Config = CFG, repeats: int = MIN_REPEATS, timed: bool = True
) -> dict[str, Measured]:
    """Compile the training step of each setup; read XLA's memory and FLOPs; time it."""
    state = init_state(cfg)
    out = {}
    for setup in setups:
        step = step_fn(cfg, setup)
        stats = compiled_stats(step, *state, runs=timed)
        timing = time_call(jax.jit(step), *state, repeats=repeats) if timed else None
        out[setup.label] = Measured(setup, stats, timing)
    return out


def table(
    measured: dict[str, Measured], labels: Sequence[str], baseline: str, flops: bool = True
) -> Table:
    """Temporary memory, FLOPs and step time of the setups ``labels``, as ratios to ``baseline``.

    XLA's cost analysis counts the body of a loop once, whatever its trip count: the FLOPs of a
    scanned step are those of one layer's forward and backward (plus what lies outside the
    loop), comparable between setups that scan the same way.
    """
    base = measured[baseline].stats
    header = ["setup", "temporary memory", f"vs. {baseline}"]
    if flops:
        header += ["FLOPs (XLA)", f"FLOPs vs. {baseline}"]
    timed = any(measured[label].time for label in labels)
    if timed:
        header += ["step time"]
    rows = []
    for label in labels:
        m = measured[label]
        row = [
            label,
            format_bytes(m.stats.temp_bytes),
            format_ratio(m.stats.temp_bytes, base.temp_bytes),
        ]
        if flops and m.stats.flops is not None:
            row += [f"{m.stats.flops / 1e9:.2f} G", format_ratio(m.stats.flops, base.flops)]
        if timed:
            row += [str(m.time) if m.time else "not timed"]
        rows.append(row)
    return Table(header, rows)


def barrier_verdict(without: int, with_barrier: int, no_remat: int) -> str:
    """What leaving ``prevent_cse``'s barrier out did to the temporaries of a checkpointed step:
    ``without`` and ``with_barrier`` its temporary bytes, ``no_remat`` those of the same step with
    no checkpoint at all (the memory the checkpoint is there to save)."""
    if with_barrier == without:
        return "the barrier made no difference to the memory"
    if with_barrier > without:
        return "the barrier cost memory"
    if without >= no_remat:
        return (
            "with the barrier the temporaries were smaller, and without it the step needed as much"
            " as no remat at all or more: leaving it out lost the whole saving"
        )
    return "with the barrier the temporaries were smaller: leaving it out lost part of the saving"


def optimization_barriers(setup: Setup, cfg: Config = CFG) -> int:
    """``optimization_barrier`` operations in the lowered (not yet compiled) training step.

    ``prevent_cse=True`` makes JAX put one around the inputs of each recomputation in the
    backward pass, so that XLA cannot merge the recomputation with the forward pass it repeats.
    """
    text = jax.jit(step_fn(cfg, setup)).lower(*init_state(cfg)).as_text()
    return text.count("stablehlo.optimization_barrier")


# --- what XLA made of it: the compiled program, compared -----------------------------------------


def compiled(setup: Setup, cfg: Config = CFG, donate: bool = False) -> Any:
    """The compiled training step of ``setup`` (``donate``: params and Adam's state donated), for
    reading its plan (:func:`~examples.tools.measure.compile_for_analysis`)."""
    donated = (0, 1) if donate else ()
    return compile_for_analysis(
        jax.jit(step_fn(cfg, setup), donate_argnums=donated).lower(*init_state(cfg))
    )


def normalized_hlo(text: str) -> str:
    """Compiled HLO text without source locations and without the numbers XLA appends to names
    (``%fusion.12`` becomes ``%fusion``): two programs that differ only in numbering compare
    equal."""
    text = re.sub(r", metadata=\{[^}]*\}", "", text)
    return re.sub(r"(%?[A-Za-z_][\w\-]*)\.\d+", r"\1", text)


@dataclasses.dataclass(frozen=True)
class Programs:
    """Two setups' compiled training steps, side by side."""

    barriers_lowered: tuple[int, int]  #: ``optimization_barrier`` in what JAX hands to XLA
    barriers_compiled: tuple[int, int]  #: ``opt-barrier`` left in XLA's optimized program
    same_program: bool  #: the optimized programs are equal once names are normalized
    temp_bytes: tuple[int, int]


def compare_programs(a: Setup, b: Setup, cfg: Config = CFG) -> Programs:
    """Compile both setups and compare what JAX lowered and what XLA made of it."""
    lowered = [jax.jit(step_fn(cfg, s)).lower(*init_state(cfg)) for s in (a, b)]
    # Compiled as they run: the page times these steps next, from JAX's persistent cache.
    done: list[Any] = [low.compile() for low in lowered]  # memory_analysis() is typed Optional
    texts = [str(c.as_text()) for c in done]
    return Programs(
        barriers_lowered=(
            lowered[0].as_text().count("stablehlo.optimization_barrier"),
            lowered[1].as_text().count("stablehlo.optimization_barrier"),
        ),
        barriers_compiled=(texts[0].count("opt-barrier"), texts[1].count("opt-barrier")),
        same_program=normalized_hlo(texts[0]) == normalized_hlo(texts[1]),
        temp_bytes=(
            int(done[0].memory_analysis().temp_size_in_bytes),
            int(done[1].memory_analysis().temp_size_in_bytes),
        ),
    )


def time_interleaved(
    setups: Sequence[Setup], cfg: Config = CFG, repeats: int = MIN_REPEATS
) -> dict[str, Timing]:
    """Time the setups' steps in turns (A, B, A, B, ...), so that a busy spell of a shared
    machine falls on all of them alike; median and spread per setup."""
    if repeats < MIN_REPEATS:
        raise ValueError(f"repeats must be at least {MIN_REPEATS}, not {repeats}")
    steps = {s.label: jax.jit(step_fn(cfg, s)) for s in setups}
    return time_in_turns(steps, *init_state(cfg), repeats=repeats, warmup=1)


# --- donating the parameters and the optimizer state ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class Buffers:
    """XLA's memory analysis of one compiled step, in bytes."""

    arguments: int
    outputs: int
    aliased: int  #: outputs written into donated arguments' buffers
    temporaries: int

    @property
    def held(self) -> int:
        """Arguments, outputs not written in place, and temporaries: what the step holds."""
        return self.arguments + self.outputs - self.aliased + self.temporaries


def buffers(setup: Setup, cfg: Config = CFG, donate: bool = False) -> Buffers:
    # Compiled, not read from JAX's persistent cache: jax 0.5 reports an executable read back
    # from the cache as aliasing nothing (tests/test_compilation_cache.py).
    with persistent_cache_off():
        m = compiled(setup, cfg, donate).memory_analysis()
    return Buffers(
        int(m.argument_size_in_bytes),
        int(m.output_size_in_bytes),
        int(m.alias_size_in_bytes),
        int(m.temp_size_in_bytes),
    )


def buffers_table(rows: dict[str, Buffers]) -> Table:
    return Table(
        ["jit", "arguments", "outputs", "aliased (alias_size)", "temporaries", "held in all"],
        [
            (
                f"`{name}`",
                *(format_bytes(v) for v in (b.arguments, b.outputs, b.aliased)),
                format_bytes(b.temporaries),
                format_bytes(b.held),
            )
            for name, b in rows.items()
        ],
    )
