"""The code of the guide "The same ideas elsewhere": other projects' remat settings, rebuilt
from ``jax.checkpoint_policies`` and applied to the site's transformer.

Facts about other projects are read from their sources at one commit each (named below, and on
the page); nothing here imports them. What the rebuilt policies keep is measured on the installed
JAX.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.tools.display import Table, format_bytes
from examples.tools.measure import compiled_stats
from examples.tools.models import Config, init_inputs, init_params, rms_norm, scan_loss
from examples.tools.residuals import Residuals, saved_residuals

P = jax.checkpoint_policies

# --- MaxText -------------------------------------------------------------------------------------

#: The source the presets below are read from: ``Decoder.get_remat_policy`` and
#: ``Decoder.minimal_policy`` in this file of AI-Hypercomputer/maxtext, at this commit.
MAXTEXT_SOURCE = (
    "AI-Hypercomputer/maxtext",
    "src/MaxText/layers/decoders.py",
    "02bc28ce534d0423f66ac208008ffb53a7ff32bf",
)

_QKV = ("query_proj", "value_proj", "key_proj", "qkv_proj")
_MINIMAL = (*_QKV, "out_proj", "mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo")


@dataclasses.dataclass(frozen=True)
class Preset:
    """One value of MaxText's ``remat_policy``: the names it saves on the device and offloads."""

    name: str
    saved: tuple[str, ...] = ()
    offloaded: tuple[str, ...] = ()
    full: bool = False  #: ``policy = None``: full recompute

    def policy(self) -> Any:
        """The JAX policy MaxText builds for this preset (``None`` for ``full``)."""
        if self.full:
            return None
        if self.offloaded:
            return P.save_and_offload_only_these_names(
                names_which_can_be_saved=list(self.saved),
                names_which_can_be_offloaded=list(self.offloaded),
                offload_src="device",
                offload_dst="pinned_host",
            )
        return P.save_only_these_names(*self.saved)

    def jax_call(self) -> str:
        """The call that builds :meth:`policy`, as MaxText writes it."""
        if self.full:
            return "None"
        if self.offloaded:
            return (
                f"save_and_offload_only_these_names(names_which_can_be_saved={list(self.saved)}, "
                f"names_which_can_be_offloaded={list(self.offloaded)}, offload_src='device', "
                "offload_dst='pinned_host')"
            )
        return f"save_only_these_names({', '.join(repr(n) for n in self.saved)})"


#: MaxText's presets, in the order of the comment on ``remat_policy`` in its ``base.yml``;
#: ``custom`` (names from the config) is left out.
MAXTEXT_PRESETS = {
    p.name: p
    for p in [
        Preset("minimal_with_context", saved=(*_MINIMAL, "context")),
        Preset("minimal", saved=_MINIMAL),
        Preset("save_dot_with_context_except_mlp", saved=(*_QKV, "context", "out_proj")),
        Preset("save_dot_except_mlpwi", saved=(*_QKV, "out_proj", "mlpwo")),
        Preset("save_dot_except_mlp", saved=(*_QKV, "out_proj")),
        Preset("save_qkv_proj", saved=_QKV),
        Preset("qkv_proj_offloaded", offloaded=("query_proj", "value_proj", "key_proj")),
        Preset("minimal_offloaded", offloaded=_MINIMAL),
        Preset("save_out_proj", saved=("out_proj",)),
        Preset("full", full=True),
    ]
}


def named_block(h: jax.Array, p: dict[str, jax.Array], heads: int) -> jax.Array:
    """:func:`examples.tools.models.block`, computing the same, with MaxText's checkpoint names.

    ``query_proj``, ``key_proj``, ``value_proj`` on the projections, ``context`` on the
    attention's output before its projection, ``out_proj`` after it, ``mlpwi`` on the first MLP
    product (before the activation) and ``mlpwo`` on the second. The weights are the site's
    (``init_params``); one fused ``wqkv`` product makes the three projections.
    """
    b, s, d = h.shape
    q, k, v = jnp.split(rms_norm(h) @ p["wqkv"], 3, axis=-1)
    q, k, v = (
        checkpoint_name(q, "query_proj"),
        checkpoint_name(k, "key_proj"),
        checkpoint_name(v, "value_proj"),
    )
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // heads)
    attended = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)
    context = checkpoint_name(attended.reshape(b, s, d), "context")
    h = h + checkpoint_name(context @ p["wo"], "out_proj")
    hidden = jax.nn.gelu(checkpoint_name(rms_norm(h) @ p["w1"], "mlpwi"))
    out: jax.Array = h + checkpoint_name(hidden @ p["w2"], "mlpwo")
    return out


def named_layer(cfg: Config) -> Callable[[jax.Array, Any], jax.Array]:
    def apply(h: jax.Array, p: Any) -> jax.Array:
        return named_block(h, p, cfg.heads)

    return apply


@dataclasses.dataclass(frozen=True)
class PresetRow:
    """What one preset keeps per layer of the named block, and what the scanned step compiles to."""

    preset: Preset
    kept_names: tuple[str, ...]  #: the names whose values it keeps (or offloads) here
    device_bytes: int  #: kept per layer on the device (inputs left out)
    host_bytes: int  #: offloaded per layer to the host
    temp_bytes: int  #: XLA's temporary memory for the whole scanned step


def _per_layer(listing: Residuals) -> tuple[int, int]:
    """Bytes one layer keeps on the device and offloads to the host (inputs left out)."""
    computed = listing.excluding_arguments()
    host = sum(r.nbytes for r in computed if r.on_host)
    return computed.nbytes - host, host


def preset_rows(cfg: Config, presets: list[str] | None = None) -> list[PresetRow]:
    """Apply each preset's policy to the named block: one layer's residuals, and the step.

    An offloaded residual is listed as the output of a transfer, not by its name; the names of
    an offloading preset are those the same names keep when saved on the device instead.
    """
    params, x = init_params(cfg), init_inputs(cfg)
    one = jax.tree.map(lambda w: w[0], params)
    rows = []
    for name in presets or list(MAXTEXT_PRESETS):
        preset = MAXTEXT_PRESETS[name]
        body = jax.checkpoint(named_layer(cfg), policy=preset.policy())
        device, host = _per_layer(saved_residuals(body, x, one))
        on_device = P.save_only_these_names(*preset.saved, *preset.offloaded)
        named = saved_residuals(jax.checkpoint(named_layer(cfg), policy=on_device), x, one)
        names = tuple(sorted({r.name for r in named if r.name})) if not preset.full else ()
        temp = compiled_stats(jax.value_and_grad(scan_loss(body)), params, x).temp_bytes
        rows.append(PresetRow(preset, names, device, host, temp))
    return rows


def preset_table(rows: list[PresetRow]) -> Table:
    header = ["MaxText `remat_policy`", "names kept (or offloaded)", "per layer on device"]
    header += ["per layer offloaded", "compiled temp memory"]
    body = [
        [
            f"`{r.preset.name}`",
            ", ".join(f"`{n}`" for n in r.kept_names) or "nothing",
            format_bytes(r.device_bytes),
            format_bytes(r.host_bytes),
            format_bytes(r.temp_bytes),
        ]
        for r in rows
    ]
    return Table(header, body)


def preset_policy_table() -> Table:
    """Each preset and the JAX call MaxText makes for it."""
    rows = [[f"`{p.name}`", f"`{p.jax_call()}`"] for p in MAXTEXT_PRESETS.values()]
    return Table(
        ["MaxText `remat_policy`", "the JAX policy it builds"], rows, align=["left", "left"]
    )


# --- Haliax --------------------------------------------------------------------------------------

#: Haliax's ``ScanCheckpointPolicy`` and its ``_to_jax_policy``, read at this commit.
HALIAX_SOURCE = (
    "stanford-crfm/haliax",
    "src/haliax/_src/scan.py",
    "a083a3cc3fa9e8ab7361a76e22bd074f24e92207",
)

#: The name Haliax gives the carry of a scan over an axis called ``layers``.
HALIAX_CARRY = "scan(layers)__carry"


def carry_named_layer(cfg: Config) -> Callable[[jax.Array, Any], jax.Array]:
    """The named block with its carry named first, as a Haliax scan names it."""

    def apply(h: jax.Array, p: Any) -> jax.Array:
        return named_block(checkpoint_name(h, HALIAX_CARRY), p, cfg.heads)

    return apply


def everything_vs_no_checkpoint(cfg: Config) -> tuple[Residuals, Residuals]:
    """One layer's residuals under ``everything_saveable`` and without a checkpoint."""
    params, x = init_params(cfg), init_inputs(cfg)
    one = jax.tree.map(lambda w: w[0], params)
    layer = named_layer(cfg)
    everything = jax.checkpoint(layer, policy=P.everything_saveable)
    return saved_residuals(everything, x, one), saved_residuals(layer, x, one)


def arrays(listing: Residuals) -> list[str]:
    """The arrays of a listing (scalar literals left out), in a comparable order."""
    return sorted(r.type_str for r in listing if r.shape)


# --- Megatron-LM ---------------------------------------------------------------------------------

#: Megatron-LM's ``--recompute-granularity selective`` ("core attention part of the transformer
#: layer is recomputed", the help text in ``megatron/training/arguments.py``) written with JAX's
#: named policies on the MaxText-named block: attention's scores and weights are not named there,
#: so every one of these keeps the projections and recomputes the attention core, and with it
#: the norms and the MLP's activation, which Megatron keeps (see :func:`all_but_attention_core`).
MEGATRON_SELECTIVE = {
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "save_only_these_names(projections)": P.save_only_these_names(
        "query_proj", "key_proj", "value_proj", "out_proj", "mlpwi", "mlpwo"
    ),
    'save_any_names_but_these("context")': P.save_any_names_but_these("context"),
}

#: The label of :func:`all_but_attention_core`'s row in :func:`selective_rows`.
ALL_BUT_CORE = "all_but_attention_core(seq): a policy function"


def all_but_attention_core(seq: int) -> Callable[..., bool]:
    """Megatron's ``selective`` itself: keep every value but the attention core's.

    A policy sees each operation's primitive, its inputs' shapes and its parameters, not the
    module it belongs to, so the core is found by shape: a batched product (the scores and the
    product with the values), an operation on a sequence-by-sequence value (scale, softmax) and
    a broadcast to one. Everything else (norms, projections, the MLP's activation) is kept.
    """

    def policy(prim: Any, *avals: Any, **params: Any) -> bool:
        if prim.name == "dot_general" and any(params["dimension_numbers"][1]):
            return False  # a product with batch dimensions
        if any(getattr(a, "shape", ())[-2:] == (seq, seq) for a in avals):
            return False  # computed from a sequence-by-sequence value
        return tuple(params.get("shape", ()))[-2:] != (seq, seq)  # not broadcast to one

    return policy


@dataclasses.dataclass(frozen=True)
class SelectiveRow:
    """One way of writing selective recomputation, measured on the named block."""

    label: str
    per_layer_bytes: int  #: kept per layer (inputs left out)
    keeps_seq_by_seq: bool  #: whether any kept value has a sequence-by-sequence shape
    temp_bytes: int  #: XLA's temporary memory of the scanned step
    flops: float | None  #: XLA's FLOPs of the scanned step (a loop body counted once)


def selective_rows(cfg: Config) -> list[SelectiveRow]:
    """Megatron's two granularities as JAX policies: ``full`` (``nothing_saveable``), the three
    named-policy writings of ``selective``, the policy function that keeps all but the attention
    core, and for contrast keeping everything, each on one layer and in the
    scanned step. A value counts as sequence by sequence by its last two dimensions, so the
    sequence must differ from the width."""
    if cfg.seq == cfg.width:
        raise ValueError("selective_rows needs a sequence length other than the width")
    params, x = init_params(cfg), init_inputs(cfg)
    one = jax.tree.map(lambda w: w[0], params)
    rows = []
    policies = {
        "full: nothing_saveable": P.nothing_saveable,
        **MEGATRON_SELECTIVE,
        ALL_BUT_CORE: all_but_attention_core(cfg.seq),
        "keep all: everything_saveable": P.everything_saveable,
    }
    for label, policy in policies.items():
        body = jax.checkpoint(named_layer(cfg), policy=policy)
        kept = saved_residuals(body, x, one).excluding_arguments()
        square = any(r.shape[-2:] == (cfg.seq, cfg.seq) for r in kept)
        stats = compiled_stats(jax.value_and_grad(scan_loss(body)), params, x)
        rows.append(SelectiveRow(label, kept.nbytes, square, stats.temp_bytes, stats.flops))
    return rows


def selective_table(rows: list[SelectiveRow]) -> Table:
    full = rows[0]
    return Table(
        ["JAX policy", "kept per layer", "keeps a seq×seq value", "compiled temp", "FLOPs vs full"],
        [
            (
                f"`{r.label}`",
                format_bytes(r.per_layer_bytes),
                "yes" if r.keeps_seq_by_seq else "no",
                format_bytes(r.temp_bytes),
                "n/a" if r.flops is None or not full.flops else f"{r.flops / full.flops:.2f}×",
            )
            for r in rows
        ],
    )


# --- BatchNorm under nn.remat ---------------------------------------------------------------------


def batchnorm_running_means(momentum: float = 0.5) -> dict[str, Any]:
    """The running mean a Flax ``nn.BatchNorm`` holds after one gradient step, with and without
    ``nn.remat`` around its module, and the batch it saw (the Dense layer's output). PyTorch's
    checkpoint reruns the forward code and can update such statistics twice; Flax keeps the
    forward pass's update and discards the recomputation's."""
    import flax.linen as nn  # flax is optional for the rest of this module

    class DenseNorm(nn.Module):
        @nn.compact
        def __call__(self, x: jax.Array) -> tuple[jax.Array, jax.Array]:
            h = nn.Dense(4)(x)
            return nn.BatchNorm(use_running_average=False, momentum=momentum)(h), h

    x = jnp.arange(12.0).reshape(3, 4)
    out: dict[str, Any] = {}
    for label, cls in (("plain", DenseNorm), ("nn.remat", nn.remat(DenseNorm))):
        model = cls()
        variables = model.init(jax.random.key(0), x)

        def loss(params: Any, model: Any = model, variables: Any = variables) -> Any:
            (y, h), updates = model.apply(
                {"params": params, "batch_stats": variables["batch_stats"]},
                x,
                mutable=["batch_stats"],
            )
            return jnp.sum(y**2), (updates, h)

        _, (updates, h) = jax.grad(loss, has_aux=True)(variables["params"])
        out[label] = updates["batch_stats"]["BatchNorm_0"]["mean"]
        out["batch"] = h
    return out
