"""How-to "Will it fit?": a decoder-only transformer at the sizes people train, in plain JAX.

The model of ``docs/howto/will-it-fit.md``: token embeddings, then a ``jax.lax.scan`` over layers of
pre-norm attention (grouped-query heads, rotary positions, a causal mask) and a gated MLP (SwiGLU),
each sublayer after an RMS norm, a final norm and an unembedding (tied to the embeddings or not),
and a cross-entropy loss. The scanned layer body is wrapped in ``jax.checkpoint`` with the policy
being compared; it names its products with ``checkpoint_name`` using MaxText's names
(``query_proj``, ``key_proj``, ``value_proj``, ``context``, ``out_proj``, ``mlpwi_0``,
``mlpwi_1``, ``mlpwo``), so MaxText's ``remat_policy`` presets apply to it unchanged.

One training step (:func:`make_step`) is the loss, its gradient and an Adam update. Parameters are
bfloat16; Adam's two moments are float32 (the update is computed in float32 and the new
parameters rounded to bfloat16). For a mesh with one axis ``fsdp``, :func:`in_specs` shards every
weight and both moments along their model-width axis, and the batch along its first axis: fully
sharded data parallelism, each device holding ``1/n`` of the state and all-gathering a layer's
weights when it computes that layer.

:data:`CONFIGS` holds a ~1B configuration (the sizes of Llama 3.2 1B) and a ~8B one (those of
Llama 3 8B); :func:`param_count` counts parameters from the shapes the code builds.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as Spec

from examples.tools.plans import NO_REMAT

P = jax.checkpoint_policies

__all__ = [
    "CONFIGS",
    "DEMO",
    "NO_REMAT",
    "POLICIES",
    "ModelConfig",
    "abstract_args",
    "in_specs",
    "init_params",
    "init_state",
    "loss",
    "make_step",
    "param_count",
    "sharded_args",
]


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The sizes of the model; ``seq`` is the training sequence length."""

    name: str
    vocab: int
    width: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    seq: int
    tied: bool
    rope_theta: float = 500_000.0

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads:
            raise ValueError(
                f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim ({self.head_dim}) must be even for rotary positions")


#: Llama 3.2 1B's sizes (tied embeddings) and Llama 3 8B's (untied), at 2,048 tokens a
#: sequence (MaxText's default length).
CONFIGS = {
    "1b": ModelConfig("1b", 128_256, 2048, 16, 32, 8, 64, 8192, 2048, tied=True),
    "8b": ModelConfig("8b", 128_256, 4096, 32, 32, 8, 128, 14_336, 2048, tied=False),
}
#: A small configuration of the same model, compiled in seconds on a CPU (the page's first cell).
DEMO = ModelConfig("demo", 4096, 256, 4, 4, 2, 64, 1024, 256, tied=True)

# --- parameters and their sharding ---------------------------------------------------------------

#: One layer's weights: name -> (shape from the config, the axis that FSDP shards).
_LAYER: dict[str, tuple[Callable[[ModelConfig], tuple[int, ...]], int]] = {
    "attn_norm": (lambda c: (c.width,), 0),
    "wq": (lambda c: (c.width, c.heads, c.head_dim), 0),
    "wk": (lambda c: (c.width, c.kv_heads, c.head_dim), 0),
    "wv": (lambda c: (c.width, c.kv_heads, c.head_dim), 0),
    "wo": (lambda c: (c.heads, c.head_dim, c.width), 2),
    "mlp_norm": (lambda c: (c.width,), 0),
    "w_gate": (lambda c: (c.width, c.mlp), 0),
    "w_up": (lambda c: (c.width, c.mlp), 0),
    "w_down": (lambda c: (c.mlp, c.width), 1),
}


def _shapes(cfg: ModelConfig) -> dict[str, Any]:
    """Every parameter's shape, and the axis FSDP shards (``None``: replicated)."""
    top: dict[str, Any] = {
        "embed": ((cfg.vocab, cfg.width), 1),
        "final_norm": ((cfg.width,), None),
    }
    if not cfg.tied:
        top["unembed"] = ((cfg.width, cfg.vocab), 0)
    layers = {}
    for name, (shape, axis) in _LAYER.items():
        # Norm scales are small: replicated. The layer axis comes first (the scan's axis).
        layers[name] = ((cfg.layers, *shape(cfg)), None if "norm" in name else axis + 1)
    return {**top, "layers": layers}


def _is_leaf(x: Any) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and isinstance(x[0], tuple)


def param_count(cfg: ModelConfig) -> int:
    """The number of parameters, from the shapes the model builds."""
    leaves = jax.tree.leaves(_shapes(cfg), is_leaf=_is_leaf)
    return sum(math.prod(shape) for shape, _ in leaves)


def param_specs(cfg: ModelConfig, axis: str = "fsdp") -> Any:
    """A ``PartitionSpec`` per parameter: the FSDP axis on the width dimension."""

    def spec(leaf: tuple[tuple[int, ...], int | None]) -> Spec:
        shape, sharded = leaf
        return Spec(*(axis if i == sharded else None for i in range(len(shape))))

    return jax.tree.map(spec, _shapes(cfg), is_leaf=_is_leaf)


def init_params(cfg: ModelConfig, seed: int = 0, dtype: Any = jnp.bfloat16) -> Any:
    """Random weights (scaled by 1/sqrt(fan-in)) and unit norm scales, in ``dtype``."""
    shapes = _shapes(cfg)
    leaves, tree = jax.tree.flatten(shapes, is_leaf=_is_leaf)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    names = [jax.tree_util.keystr(p) for p, _ in jax.tree.flatten_with_path(shapes, _is_leaf)[0]]

    def make(key: jax.Array, leaf: Any, name: str) -> jax.Array:
        shape, _ = leaf
        if "norm" in name:
            return jnp.ones(shape, dtype)
        # Inputs per output: the width for most weights, heads x head_dim for wo, mlp for w_down,
        # one for the embedding table (a row is looked up, not summed).
        if name.endswith("['embed']"):
            scale = 1
        elif name.endswith("['unembed']"):
            scale = shape[0]
        else:  # stacked layers: (layers, inputs..., outputs...)
            scale = shape[1] * shape[2] if name.endswith("['wo']") else shape[1]
        return (jax.random.normal(key, shape) / math.sqrt(scale)).astype(dtype)

    return jax.tree.unflatten(
        tree, [make(k, leaf, n) for k, leaf, n in zip(keys, leaves, names, strict=True)]
    )


# --- the model -----------------------------------------------------------------------------------


def rms_norm(x: jax.Array, scale: jax.Array, eps: float = 1e-5) -> jax.Array:
    """``x / rms(x) * scale``, computed in float32, returned in ``x``'s dtype."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (y * scale.astype(jnp.float32)).astype(x.dtype)


def rope(x: jax.Array, theta: float) -> jax.Array:
    """Rotary positions on ``x`` of shape (batch, seq, heads, head_dim), halves rotated."""
    seq, dim = x.shape[1], x.shape[-1]
    half = dim // 2
    freq = theta ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angle = jnp.arange(seq, dtype=jnp.float32)[:, None] * freq[None, :]
    sin, cos = jnp.sin(angle)[None, :, None, :], jnp.cos(angle)[None, :, None, :]
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).astype(x.dtype)


def attention(x: jax.Array, p: dict[str, jax.Array], cfg: ModelConfig) -> jax.Array:
    """Causal grouped-query self-attention with rotary positions; products named as MaxText's."""
    b, s, _ = x.shape
    group = cfg.heads // cfg.kv_heads
    q = checkpoint_name(jnp.einsum("bsd,dhk->bshk", x, p["wq"]), "query_proj")
    k = checkpoint_name(jnp.einsum("bsd,dhk->bshk", x, p["wk"]), "key_proj")
    v = checkpoint_name(jnp.einsum("bsd,dhk->bshk", x, p["wv"]), "value_proj")
    q, k = rope(q, cfg.rope_theta), rope(k, cfg.rope_theta)
    q = q.reshape(b, s, cfg.kv_heads, group, cfg.head_dim)
    logits = jnp.einsum("bskgd,btkd->bkgst", q, k, preferred_element_type=jnp.float32)
    logits = logits / math.sqrt(cfg.head_dim)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    logits = jnp.where(causal, logits, -1e30)  # masked: exp() of it is 0
    weights = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    context = jnp.einsum("bkgst,btkd->bskgd", weights, v).reshape(b, s, cfg.heads, cfg.head_dim)
    context = checkpoint_name(context, "context")
    out: jax.Array = checkpoint_name(jnp.einsum("bshk,hkd->bsd", context, p["wo"]), "out_proj")
    return out


def mlp(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    """The gated MLP (SwiGLU): ``(silu(x @ w_gate) * (x @ w_up)) @ w_down``."""
    gate = checkpoint_name(x @ p["w_gate"], "mlpwi_0")
    up = checkpoint_name(x @ p["w_up"], "mlpwi_1")
    out: jax.Array = checkpoint_name((jax.nn.silu(gate) * up) @ p["w_down"], "mlpwo")
    return out


def batch_sharded(x: jax.Array, axis: str = "fsdp") -> jax.Array:
    """Keep ``x`` sharded along its batch axis where the ambient mesh (``jax.set_mesh``) has
    ``axis``; unchanged elsewhere. Without it, XLA's partitioner may keep whole batches on every
    device and split the weights' axes instead, which is not FSDP."""
    get_mesh = getattr(jax.sharding, "get_abstract_mesh", None)  # jax >= 0.5.1
    if get_mesh is None or axis not in get_mesh().axis_names:
        return x
    out: jax.Array = jax.lax.with_sharding_constraint(x, Spec(axis, *([None] * (x.ndim - 1))))
    return out


def layer(h: jax.Array, p: dict[str, jax.Array], cfg: ModelConfig) -> jax.Array:
    """One pre-norm decoder layer: attention, then the MLP, each added to the residual stream."""
    h = batch_sharded(h)
    h = h + attention(rms_norm(h, p["attn_norm"]), p, cfg)
    return h + mlp(rms_norm(h, p["mlp_norm"]), p)


def loss(params: Any, tokens: jax.Array, targets: jax.Array, cfg: ModelConfig, policy: Any) -> Any:
    """Mean next-token cross-entropy; the scanned layer is checkpointed unless ``policy`` is
    :data:`~examples.tools.plans.NO_REMAT` (``None``: no ``jax.checkpoint`` at all). Logits are
    computed in float32."""
    body: Callable[..., jax.Array] = functools.partial(layer, cfg=cfg)
    if policy is not NO_REMAT:
        body = jax.checkpoint(body, policy=policy)
    h = batch_sharded(params["embed"][tokens])
    h, _ = jax.lax.scan(lambda h, p: (body(h, p), None), h, params["layers"])
    h = batch_sharded(rms_norm(h, params["final_norm"]))
    unembed = params["embed"].T if cfg.tied else params["unembed"]
    logits = jnp.einsum("bsd,dv->bsv", h, unembed, preferred_element_type=jnp.float32)
    log_z = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return jnp.mean(log_z - picked)


# --- the policies compared -----------------------------------------------------------------------

#: MaxText's "minimal": every projection's output kept, attention's context recomputed.
MINIMAL = (
    "query_proj",
    "key_proj",
    "value_proj",
    "out_proj",
    "mlpwi_0",
    "mlpwi_1",
    "mlpwo",
)
QKV = ("query_proj", "key_proj", "value_proj")

#: Label -> policy, from keeping everything to keeping nothing; the last one moves the kept
#: projections to host memory (``pinned_host``) instead of holding them on the device.
POLICIES: dict[str, Any] = {
    "no remat": NO_REMAT,
    "minimal (MaxText)": P.save_only_these_names(*MINIMAL),
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "save_qkv_proj (MaxText)": P.save_only_these_names(*QKV),
    "qkv_proj_offloaded (MaxText)": P.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=list(QKV),
        offload_src="device",
        offload_dst="pinned_host",
    ),
    "nothing_saveable": P.nothing_saveable,
}
#: Pairs (more kept, less kept) whose saved sets nest: the first never plans less memory.
NESTED = (
    ("no remat", "minimal (MaxText)"),
    ("minimal (MaxText)", "save_qkv_proj (MaxText)"),
    ("save_qkv_proj (MaxText)", "nothing_saveable"),
    ("dots_with_no_batch_dims_saveable", "nothing_saveable"),
)

# --- one training step ---------------------------------------------------------------------------

ADAM = {"lr": 3e-4, "b1": 0.9, "b2": 0.95, "eps": 1e-8}


def init_state(params: Any) -> dict[str, Any]:
    """Adam's state: both moments in float32, and the step count."""
    zeros = jax.tree.map(lambda w: jnp.zeros(w.shape, jnp.float32), params)
    return {"m": zeros, "v": zeros, "count": jnp.zeros((), jnp.int32)}


def adam(params: Any, grads: Any, state: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """One Adam update in float32; the parameters come back in their own dtype."""
    lr, b1, b2, eps = ADAM["lr"], ADAM["b1"], ADAM["b2"], ADAM["eps"]
    count = state["count"] + 1
    t = count.astype(jnp.float32)
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g.astype(jnp.float32), state["m"], grads)
    v = jax.tree.map(
        lambda v, g: b2 * v + (1 - b2) * jnp.square(g.astype(jnp.float32)), state["v"], grads
    )

    def update(w: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        step = lr * (m / (1 - b1**t)) / (jnp.sqrt(v / (1 - b2**t)) + eps)
        new: jax.Array = (w.astype(jnp.float32) - step).astype(w.dtype)
        return new

    return jax.tree.map(update, params, m, v), {"m": m, "v": v, "count": count}


def make_step(cfg: ModelConfig, policy: Any) -> Callable[..., Any]:
    """``step(params, opt_state, tokens, targets) -> (params, opt_state, loss)``."""

    def step(params: Any, opt_state: Any, tokens: jax.Array, targets: jax.Array) -> Any:
        value, grads = jax.value_and_grad(loss)(params, tokens, targets, cfg, policy)
        params, opt_state = adam(params, grads, opt_state)
        return params, opt_state, value

    return step


def abstract_args(cfg: ModelConfig, batch: int) -> tuple[Any, Any, Any, Any]:
    """The step's arguments as shapes and dtypes (``batch`` is the global batch): no memory."""
    params = jax.eval_shape(lambda: init_params(cfg))
    opt_state = jax.eval_shape(init_state, params)
    tokens = jax.ShapeDtypeStruct((batch, cfg.seq), jnp.int32)
    return params, opt_state, tokens, tokens


def in_specs(cfg: ModelConfig, axis: str = "fsdp") -> tuple[Any, Any, Spec, Spec]:
    """FSDP: weights and both moments sharded on the width axis, the batch on its first axis."""
    weights = param_specs(cfg, axis)
    opt = {"m": weights, "v": weights, "count": Spec()}
    return weights, opt, Spec(axis, None), Spec(axis, None)


def sharded_args(cfg: ModelConfig, batch: int, mesh: Mesh) -> Any:
    """:func:`abstract_args` with the FSDP shardings of :func:`in_specs` on ``mesh``."""

    def shard(spec: Spec, subtree: Any) -> Any:
        sharding = NamedSharding(mesh, spec)
        return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding),
                            subtree)  # fmt: skip

    return jax.tree.map(shard, in_specs(cfg), abstract_args(cfg, batch),
                        is_leaf=lambda x: isinstance(x, Spec))  # fmt: skip
