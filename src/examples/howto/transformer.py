"""The transformer block of the how-to guides: :func:`examples.models.block` with names.

Same weights, same math as the shared block (pre-norm attention and an MLP of ratio 4, with
residual connections), and the same parameters from :func:`examples.models.init_params`. Two
things differ, both needed by the guides:

- ``checkpoint_name`` sits on the values a policy may want to keep: the attention projections
  (``"qkv"``), the attention weights (``"attn_probs"``, only where the attention is written out)
  and the MLP's pre-activation (``"mlp_pre"``);
- ``attention="dot_product_attention"`` swaps the written-out attention for
  ``jax.nn.dot_product_attention``, as production models do.

Any dtype goes through: give it bfloat16 parameters and inputs and it runs in bfloat16, with the
attention logits and softmax in float32 as ``jax.nn.dot_product_attention`` computes them.
"""

from __future__ import annotations

import math
from typing import Literal

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.models import rms_norm

Attention = Literal["einsum", "dot_product_attention"]
#: Every name :func:`block` attaches, in the order it computes them.
NAMES = ("qkv", "attn_probs", "mlp_pre")


def block(
    h: jax.Array, p: dict[str, jax.Array], heads: int, attention: Attention = "einsum"
) -> jax.Array:
    """One pre-norm layer, with the values worth keeping named."""
    b, s, d = h.shape
    qkv = checkpoint_name(rms_norm(h) @ p["wqkv"], "qkv")
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in jnp.split(qkv, 3, axis=-1))
    if attention == "einsum":
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k, preferred_element_type=jnp.float32)
        probs = jax.nn.softmax(logits / math.sqrt(d // heads), axis=-1)
        probs = checkpoint_name(probs, "attn_probs")  # float32: what softmax's derivative reads
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
