"""The explorer's model, checkpointed: the transformer block of :mod:`examples.tools.models`,
scanned over its layers, with ``jax.checkpoint`` and one policy on the scanned block.

:data:`POLICIES` is what the page measures: every public policy of ``jax.checkpoint_policies``,
or another name for one (:data:`ALIASES`, found by identity in :mod:`examples.reference.policies`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from numpy.typing import NDArray

from examples.reference.policies import ALIASES, excluding_names
from examples.tools.models import Config, block, init_inputs, init_params, scan_loss
from examples.tools.residuals import Residuals, saved_residuals

__all__ = ["ALIASES", "NO_REMAT", "OFFLOAD_POLICIES", "POLICIES", "layer_fn", "make_loss"]

P = jax.checkpoint_policies
NO_REMAT = "no remat"

#: The policies measured on the page: name -> policy (``None`` for no ``jax.checkpoint``).
POLICIES: dict[str, Any] = {
    NO_REMAT: None,
    "everything_saveable": P.everything_saveable,
    "dots_saveable": P.dots_saveable,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "save_only_these_names(mlp_hidden)": P.save_only_these_names("mlp_hidden"),
    "save_anything_except_these_names(attn_logits)": P.save_anything_except_these_names(
        "attn_logits"
    ),
    "save_any_names_but_these(attn_logits)": P.save_any_names_but_these("attn_logits"),
    "save_from_both_policies(no-batch dots, mlp_hidden)": P.save_from_both_policies(
        P.dots_with_no_batch_dims_saveable, P.save_only_these_names("mlp_hidden")
    ),
    "save_and_offload_only_these_names(offload mlp_hidden)": P.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["mlp_hidden"],
        offload_src="device",
        offload_dst="pinned_host",
    ),
    "offload_dot_with_no_batch_dims(pinned_host)": P.offload_dot_with_no_batch_dims(
        "device", "pinned_host"
    ),
    "nothing_saveable": P.nothing_saveable,
}
#: The policies that ask to move residuals to host memory. Every backend compiles them; whether
#: anything moves shows in ``host_temp_bytes`` (zero where the backend keeps it all in one place).
OFFLOAD_POLICIES = (
    "save_and_offload_only_these_names(offload mlp_hidden)",
    "offload_dot_with_no_batch_dims(pinned_host)",
)


def layer_fn(
    cfg: Config, policy: Any, *, prevent_cse: bool = True
) -> Callable[[jax.Array, dict[str, jax.Array]], jax.Array]:
    """The block, under ``jax.checkpoint`` with ``policy`` unless it is ``None``.

    ``prevent_cse`` is JAX's default (``True``) unless asked: the page measures that default, and
    :func:`examples.explorer.run.barrier_costs` what turning it off changes inside the scan."""
    fn = lambda h, p: block(h, p, cfg.heads)
    if policy is None:
        return fn
    return jax.checkpoint(fn, policy=policy, prevent_cse=prevent_cse)


def make_loss(
    cfg: Config, policy: Any, *, prevent_cse: bool = True
) -> Callable[[dict[str, jax.Array], jax.Array], jax.Array]:
    """Scan the (possibly checkpointed) block over the layers; mean square of the output."""
    return scan_loss(layer_fn(cfg, policy, prevent_cse=prevent_cse))


def layer_residuals(cfg: Config, policy: Any) -> Residuals:
    """What one (checkpointed) block computes and keeps for the backward pass, inputs left out."""
    params, x = init_params(cfg), init_inputs(cfg)
    one_layer = {k: v[0] for k, v in params.items()}
    return saved_residuals(layer_fn(cfg, policy), x, one_layer).excluding_arguments()


def name_exclusion(cfg: Config) -> dict[str, Residuals]:
    """One block's residuals under the ways of leaving a named value out (the page's "Excluding
    a name"): the policy JAX ships, a policy that honours the names (``excluding_names``), and
    the allow-list that really drops a name, next to ``everything_saveable``."""
    return {
        label: layer_residuals(cfg, policy)
        for label, policy in {
            "everything_saveable": P.everything_saveable,
            'save_anything_except_these_names("attn_logits")': (
                P.save_anything_except_these_names("attn_logits")
            ),
            'excluding_names("attn_logits")': excluding_names("attn_logits"),
            'excluding_names("mlp_hidden")': excluding_names("mlp_hidden"),
            'save_any_names_but_these("attn_logits")': P.save_any_names_but_these("attn_logits"),
        }.items()
    }


def loss_float64(cfg: Config, params: dict[str, Any], x: Any) -> float:
    """The same loss in NumPy float64, as an independent reference."""
    h = np.asarray(x, np.float64)
    b, s, d = h.shape
    dh = d // cfg.heads

    def norm(t: NDArray[np.float64]) -> NDArray[np.float64]:
        mean_square: NDArray[np.float64] = np.mean(t * t, axis=-1, keepdims=True)
        return t / np.sqrt(mean_square + 1e-6)

    def gelu(
        t: NDArray[np.float64],
    ) -> NDArray[np.float64]:  # jax.nn.gelu's default tanh approximation
        tanh: NDArray[np.float64] = np.tanh(np.sqrt(2 / np.pi) * (t + 0.044715 * t**3))
        return 0.5 * t * (1 + tanh)

    for i in range(cfg.layers):
        w = {k: np.asarray(v[i], np.float64) for k, v in params.items()}
        q, k, v = np.split(norm(h) @ w["wqkv"], 3, axis=-1)
        q, k, v = (t.reshape(b, s, cfg.heads, dh) for t in (q, k, v))
        logits = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dh)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        h = h + np.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, d) @ w["wo"]
        h = h + gelu(norm(h) @ w["w1"]) @ w["w2"]
    return float(np.mean(h**2))
