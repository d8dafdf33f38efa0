"""The models several pages share, all written the way deep models usually are: one layer's
function applied over weights stacked along a leading axis with ``jax.lax.scan``.

- :func:`scan_loss` turns a layer ``(carry, layer_params) -> carry`` into a loss over the stack;
- :func:`tanh_layer` and :func:`stacked_tanh` are the small MLP of the landing page and the
  pitfalls page;
- :class:`Config`, :func:`block` and friends are the pre-norm transformer of the explorer and the
  sharded step; :func:`named_block` is the same layer with names, for the how-to guides.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

# --- scan over layers -----------------------------------------------------------------------------


def scan_layers(layer: Callable[[Any, Any], Any], params: Any, x: Any) -> Any:
    """Apply ``layer(carry, layer_params)`` once per slice of the stacked ``params``."""
    out, _ = jax.lax.scan(lambda h, p: (layer(h, p), None), x, params)
    return out


def scan_loss(layer: Callable[[Any, Any], Any]) -> Callable[[Any, Any], jax.Array]:
    """``loss(params, x)``: the mean square of :func:`scan_layers`' output.

    Wrap ``layer`` in ``jax.checkpoint`` (with a policy) before passing it, and the scanned body
    is what gets checkpointed: the usual place for remat in a deep model.
    """

    def loss(params: Any, x: Any) -> jax.Array:
        return jnp.mean(scan_layers(layer, params, x) ** 2)

    return loss


# --- a small MLP ----------------------------------------------------------------------------------


def tanh_layer(h: jax.Array, w: jax.Array) -> jax.Array:
    """One layer: ``tanh(h @ w)``."""
    return jnp.tanh(h @ w)


def stacked_tanh(
    depth: int = 16, batch: int = 64, width: int = 128, seed: int = 0
) -> tuple[jax.Array, jax.Array]:
    """Stacked weights ``(depth, width, width)`` / sqrt(width), and an input ``(batch, width)``."""
    kw, kx = jax.random.split(jax.random.key(seed))
    weights = jax.random.normal(kw, (depth, width, width)) / jnp.sqrt(width)
    return weights, jax.random.normal(kx, (batch, width))


# --- a pre-norm transformer -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Config:
    layers: int
    batch: int
    seq: int
    width: int
    heads: int
    mlp_ratio: int = 4

    def __post_init__(self) -> None:
        if self.width % self.heads:
            raise ValueError(f"width {self.width} is not divisible by heads {self.heads}")


SIZES = {
    "tiny": Config(layers=2, batch=2, seq=8, width=16, heads=2),
    "small": Config(layers=6, batch=4, seq=128, width=128, heads=4),
    "medium": Config(layers=12, batch=8, seq=1024, width=1024, heads=16),
    "large": Config(layers=24, batch=16, seq=2048, width=2048, heads=16),
}


def init_params(cfg: Config, seed: int = 0) -> dict[str, jax.Array]:
    """Weights of all layers, stacked along a leading layer axis for ``jax.lax.scan``."""
    d, h = cfg.width, cfg.mlp_ratio * cfg.width
    shapes = {"wqkv": (d, 3 * d), "wo": (d, d), "w1": (d, h), "w2": (h, d)}
    keys = jax.random.split(jax.random.key(seed), len(shapes))
    return {
        name: jax.random.normal(k, (cfg.layers, *shape)) / math.sqrt(shape[0])
        for k, (name, shape) in zip(keys, shapes.items(), strict=True)
    }


def init_inputs(cfg: Config, seed: int = 1) -> jax.Array:
    return jax.random.normal(jax.random.key(seed), (cfg.batch, cfg.seq, cfg.width))


def rms_norm(x: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def block(h: jax.Array, p: dict[str, jax.Array], heads: int) -> jax.Array:
    """Pre-norm self-attention and MLP with residual connections, for one layer's weights."""
    b, s, d = h.shape
    q, k, v = jnp.split(rms_norm(h) @ p["wqkv"], 3, axis=-1)
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // heads)
    logits = checkpoint_name(logits, "attn_logits")
    attended = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)
    h = h + attended.reshape(b, s, d) @ p["wo"]
    hidden: jax.Array = checkpoint_name(jax.nn.gelu(rms_norm(h) @ p["w1"]), "mlp_hidden")
    return h + hidden @ p["w2"]


Attention = Literal["einsum", "dot_product_attention"]
#: Every name :func:`named_block` attaches, in the order it computes them.
BLOCK_NAMES = ("qkv", "attn_probs", "mlp_pre")


def named_block(
    h: jax.Array, p: dict[str, jax.Array], heads: int, attention: Attention = "einsum"
) -> jax.Array:
    """:func:`block` with the values a policy may want to keep named, and a choice of attention.

    Same weights and math as :func:`block`. ``checkpoint_name`` marks the attention projections
    (``"qkv"``), the attention weights (``"attn_probs"``, where the attention is written out) and
    the MLP's pre-activation (``"mlp_pre"``); ``attention="dot_product_attention"`` uses
    ``jax.nn.dot_product_attention``, as production models do. Any dtype goes through: with
    bfloat16 parameters and inputs it runs in bfloat16, logits and softmax in float32.
    """
    b, s, d = h.shape
    qkv = checkpoint_name(rms_norm(h) @ p["wqkv"], "qkv")
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in jnp.split(qkv, 3, axis=-1))
    if attention == "einsum":
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        probs = jax.nn.softmax(logits / math.sqrt(d // heads), axis=-1)
        # A name for the attention weights. Keeping them spares no recomputation: softmax's own
        # derivative reads its internal output, not this named copy (howto/choose-policy).
        probs = checkpoint_name(probs, "attn_probs")
        attended = jnp.einsum("bhqk,bkhd->bqhd", probs.astype(h.dtype), v)
    elif attention == "dot_product_attention":
        attended = jax.nn.dot_product_attention(q, k, v)
    else:
        raise ValueError(
            f"attention must be 'einsum' or 'dot_product_attention', not {attention!r}"
        )
    h = h + attended.reshape(b, s, d) @ p["wo"]
    pre = checkpoint_name(rms_norm(h) @ p["w1"], "mlp_pre")
    return h + jax.nn.gelu(pre) @ p["w2"]


# --- a residual MLP (the landing page) ------------------------------------------------------------


def mlp_layer(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    """One residual MLP block: ``h + gelu(rms_norm(h) @ w1) @ w2``, widening then narrowing."""
    return h + jax.nn.gelu(rms_norm(h) @ p["w1"]) @ p["w2"]


def stacked_mlp(
    depth: int = 16, batch: int = 64, width: int = 128, ratio: int = 4, seed: int = 0
) -> tuple[dict[str, jax.Array], jax.Array]:
    """Weights of ``depth`` :func:`mlp_layer` blocks, stacked for ``jax.lax.scan``, and an input.

    ``w1`` is ``(depth, width, ratio * width)`` and ``w2`` the way back, each scaled by the square
    root of its fan-in; the input is ``(batch, width)``.
    """
    k1, k2, kx = jax.random.split(jax.random.key(seed), 3)
    hidden = ratio * width
    weights = {
        "w1": jax.random.normal(k1, (depth, width, hidden)) / math.sqrt(width),
        "w2": jax.random.normal(k2, (depth, hidden, width)) / math.sqrt(hidden),
    }
    return weights, jax.random.normal(kx, (batch, width))
