"""How-to: choose a checkpoint policy for a transformer block.

The code of ``docs/howto/choose-policy.md``, in the order of the page. The block is the one of
:func:`examples.tools.models.named_block` in the shape of production models: bfloat16 weights
and activations (many trainers keep float32 master weights; the page says so),
``jax.nn.dot_product_attention``, an MLP of ratio 4, scanned over its layers. Each
candidate policy is compiled at a short and a long sequence, and the page reads XLA's memory and
FLOPs and the step time off the build. What a policy can and cannot see of a fused attention
kernel is :mod:`examples.howto.fused_attention`; host offload of the named values is
:mod:`examples.howto.offload_check`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.tools import compat, models
from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.jaxprs import walk
from examples.tools.measure import (
    MIN_REPEATS,
    CompiledStats,
    Timing,
    compiled_stats,
    stats_of,
    time_interleaved,
)
from examples.tools.models import Attention, Config, init_inputs, init_params, scan_layers
from examples.tools.models import named_block as block
from examples.tools.residuals import Residuals, saved_residuals

P = jax.checkpoint_policies
DTYPE = jnp.bfloat16

#: The two sizes measured: four layers of width 128 with two heads of 64, at 256 and 1024 tokens.
SHORT = Config(layers=4, batch=2, seq=256, width=128, heads=2)
LONG = dataclasses.replace(SHORT, seq=1024)

# --- the model -----------------------------------------------------------------------------------


Mlp = Literal["gelu", "gated"]


def gated_block(
    h: jax.Array,
    p: dict[str, jax.Array],
    heads: int,
    attention: Attention = "dot_product_attention",
) -> jax.Array:
    """The block with a gated (SwiGLU) MLP, as Llama-style models and MaxText's default have it:
    ``(silu(x @ w_gate) * (x @ w_up)) @ w_down``, three matrices of ``d × r·d`` instead of two.
    The attention is :func:`~examples.tools.models.named_block`'s; the gate's and the up
    projection's outputs are named ``"mlp_gate"`` and ``"mlp_up"``."""
    b, s, d = h.shape
    qkv = checkpoint_name(models.rms_norm(h) @ p["wqkv"], "qkv")
    q, k, v = (t.reshape(b, s, heads, d // heads) for t in jnp.split(qkv, 3, axis=-1))
    attended = jax.nn.dot_product_attention(q, k, v)
    h = h + attended.reshape(b, s, d) @ p["wo"]
    n = models.rms_norm(h)
    gate = checkpoint_name(n @ p["w_gate"], "mlp_gate")
    up = checkpoint_name(n @ p["w_up"], "mlp_up")
    out: jax.Array = h + (jax.nn.silu(gate) * up) @ p["w_down"]
    return out


def init(cfg: Config, mlp: Mlp = "gelu") -> tuple[dict[str, jax.Array], jax.Array]:
    """bfloat16 weights (stacked over layers) and a bfloat16 batch of inputs; with
    ``mlp="gated"``, the gated MLP's three matrices instead of ``w1`` and ``w2``."""
    params = init_params(cfg)
    if mlp == "gated":
        d, hidden = cfg.width, cfg.mlp_ratio * cfg.width
        shapes = {"w_gate": (d, hidden), "w_up": (d, hidden), "w_down": (hidden, d)}
        keys = jax.random.split(jax.random.key(2), len(shapes))
        params = {name: w for name, w in params.items() if name in ("wqkv", "wo")} | {
            name: jax.random.normal(key, (cfg.layers, *shape)) / shape[0] ** 0.5
            for key, (name, shape) in zip(keys, shapes.items(), strict=True)
        }
    params = jax.tree.map(lambda w: w.astype(DTYPE), params)
    return params, init_inputs(cfg).astype(DTYPE)


def layer_fn(
    cfg: Config, policy: Any, attention: Attention = "dot_product_attention", mlp: Mlp = "gelu"
) -> Callable[[jax.Array, Any], jax.Array]:
    """One layer's block; checkpointed with ``policy`` unless ``policy`` is :data:`NO_REMAT`."""
    layer: Callable[[jax.Array, Any], jax.Array] = functools.partial(
        gated_block if mlp == "gated" else block, heads=cfg.heads, attention=attention
    )
    return layer if policy is NO_REMAT else jax.checkpoint(layer, policy=policy, prevent_cse=False)


def make_loss(
    cfg: Config, policy: Any, attention: Attention = "dot_product_attention", mlp: Mlp = "gelu"
) -> Callable[[Any, jax.Array], jax.Array]:
    """Scan the block over the layers; the loss is the mean square of the output, in float32."""
    layer = layer_fn(cfg, policy, attention, mlp)

    def loss(params: Any, x: jax.Array) -> jax.Array:
        h = scan_layers(layer, params, x)
        return jnp.mean(h.astype(jnp.float32) ** 2)

    return loss


# --- the candidates ------------------------------------------------------------------------------

#: Stands for "no jax.checkpoint at all" (``None`` would mean JAX's default policy).
NO_REMAT = "no remat"
#: The two products whose outputs the backward pass reads and which are costly to rebuild.
KEEP_NAMES = ("qkv", "mlp_pre")

CANDIDATES: dict[str, Any] = {
    NO_REMAT: NO_REMAT,
    "nothing_saveable": P.nothing_saveable,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    'save_only_these_names("qkv", "mlp_pre")': P.save_only_these_names(*KEEP_NAMES),
    "dots_saveable": P.dots_saveable,
}
#: The names worth keeping in :func:`gated_block`: the attention projection and the MLP's two
#: products whose outputs the backward pass reads.
GATED_KEEP_NAMES = ("qkv", "mlp_gate", "mlp_up")
#: The candidates measured on the gated block (the attention questions are the same as above).
GATED_CANDIDATES: dict[str, Any] = {
    NO_REMAT: NO_REMAT,
    "nothing_saveable": P.nothing_saveable,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    'save_only_these_names("qkv", "mlp_gate", "mlp_up")': P.save_only_these_names(
        *GATED_KEEP_NAMES
    ),
}


def time_verdict(measured: dict[str, Measured]) -> str:
    """What the timings of one run allow to say: the candidates whose range of calls lies wholly
    below or above ``nothing_saveable``'s, or that this machine cannot tell them apart."""
    base = measured["nothing_saveable"].time
    if base is None:
        return "not timed"
    verdicts = {
        label: m.time.compare(base)
        for label, m in measured.items()
        if m.time is not None and label != "nothing_saveable"
    }
    faster = [label for label, v in verdicts.items() if v == "faster"]
    slower = [label for label, v in verdicts.items() if v == "slower"]
    if not faster and not slower:
        return "every candidate's calls overlap nothing_saveable's: this CPU cannot tell"
    parts = []
    if faster:
        parts.append("faster than nothing_saveable in every call: " + ", ".join(faster))
    if slower:
        parts.append("slower in every call: " + ", ".join(slower))
    others = [label for label, v in verdicts.items() if v == "within the noise"]
    if others:
        parts.append("the rest overlap it: " + ", ".join(others))
    return "; ".join(parts)


@dataclasses.dataclass(frozen=True)
class Measured:
    label: str
    seq: int
    stats: CompiledStats
    kept: Residuals  #: what one layer keeps besides its arguments
    time: Timing | None


def measure(
    cfg: Config,
    labels: Sequence[str] | None = None,
    repeats: int = MIN_REPEATS,
    timed: bool = True,
    mlp: Mlp = "gelu",
) -> dict[str, Measured]:
    """Compile ``jax.value_and_grad`` of the scanned loss for each candidate, and time the
    compiled steps in turns (:func:`examples.tools.measure.time_interleaved`). ``mlp="gated"``
    measures :func:`gated_block` with :data:`GATED_CANDIDATES`."""
    candidates = GATED_CANDIDATES if mlp == "gated" else CANDIDATES
    params, x = init(cfg, mlp)
    one_layer = jax.tree.map(lambda w: w[0], params)
    labels = list(labels or candidates)
    steps = {
        label: jax.value_and_grad(make_loss(cfg, candidates[label], mlp=mlp)) for label in labels
    }
    compiled, times = {}, {}
    if timed:  # compiled as they run; the figures are read off the executables timed
        compiled = {label: jax.jit(s).lower(params, x).compile() for label, s in steps.items()}
        times = time_interleaved(compiled, params, x, repeats=repeats)
    out = {}
    for label in labels:
        kept = saved_residuals(layer_fn(cfg, candidates[label], mlp=mlp), x, one_layer)
        stats = stats_of(compiled[label]) if timed else compiled_stats(steps[label], params, x)
        out[label] = Measured(label, cfg.seq, stats, kept.excluding_arguments(), times.get(label))
    return out


@dataclasses.dataclass(frozen=True)
class Trade:
    """A policy against ``nothing_saveable``: bytes it keeps more, recomputation it spares."""

    extra_bytes: int  #: temporary memory above nothing_saveable's
    spared: float  #: fraction of nothing_saveable's extra FLOPs (over no remat) that it avoids


def trade(measured: dict[str, Measured], label: str) -> Trade:
    base, none, m = (measured[k].stats for k in ("nothing_saveable", NO_REMAT, label))
    if base.flops is None or none.flops is None or m.flops is None:
        raise ValueError(f"the {jax.default_backend()} backend reports no FLOP count")
    recompute = base.flops - none.flops
    return Trade(m.temp_bytes - base.temp_bytes, (base.flops - m.flops) / recompute)


def spared_text(t: Trade) -> str:
    """The share spared, as a reader can take it: a policy cannot spare more than all of the
    recomputation, so where XLA's count for the policy's step falls to (or below) the count for
    the step without remat, the share is "all" (the page says why the count can go lower)."""
    return "all" if t.spared >= 0.995 else f"{t.spared:.0%}"


def gated_verdict(runs: dict[str, dict[str, Measured]], dots: str, names: str) -> str:
    """The dots policy against the names policy in each run: the memory it keeps more and the
    shares of the recomputation each spares, led by whether one of them wins on both counts."""
    parts, trade_off = [], True
    for measured in runs.values():
        td, tn = trade(measured, dots), trade(measured, names)
        more = td.extra_bytes - tn.extra_bytes
        trade_off = trade_off and (more > 0) == (td.spared > tn.spared)
        parts.append(
            f"at {measured[dots].seq} tokens, {dots} keeps {format_bytes(abs(more))} "
            f"{'more' if more >= 0 else 'less'} than the names policy and spares "
            f"{spared_text(td)} of the recomputation against {spared_text(tn)}"
        )
    lead = (
        "As with the two-matrix MLP, neither policy wins on both counts"
        if trade_off
        else "Here one policy is ahead on both counts in some run"
    )
    return f"{lead}: {'; '.join(parts)}."


def largest_kept(m: Measured) -> str:
    """The largest value one layer keeps, as ``print_saved_residuals`` types it, or "nothing"."""
    if not m.kept:
        return "nothing"
    biggest = max(m.kept, key=lambda r: r.nbytes)
    return f"`{biggest.type_str}` ({biggest.detail})"


def table(measured: dict[str, Measured]) -> Table:
    """One row per candidate: memory, FLOPs and time, and its trade against nothing_saveable."""
    none = measured[NO_REMAT].stats
    rows = []
    for label, m in measured.items():
        t = trade(measured, label) if label != NO_REMAT else None
        rows.append(
            [
                f"`{label}`",
                format_bytes(m.kept.nbytes) if label != NO_REMAT else "(all)",
                largest_kept(m) if label != NO_REMAT else "",
                format_bytes(m.stats.temp_bytes),
                format_ratio(m.stats.flops, none.flops),
                "" if t is None else spared_text(t),
                str(m.time) if m.time else "not timed",
            ]
        )
    header = [
        "policy",
        "kept per layer",
        "largest kept",
        "temporary memory",
        "FLOPs vs. no remat",
        "recompute spared",
        "step time",
    ]
    return Table(header, rows, align=["left", "right", "left", "right", "right", "right", "right"])


def trade_table(runs: dict[str, dict[str, Measured]], labels: Sequence[str]) -> Table:
    """For each run (a sequence length) and policy: bytes above nothing_saveable, and the share
    of nothing_saveable's recomputation that the policy spares."""
    rows = []
    for run, measured in runs.items():
        for label in labels:
            t = trade(measured, label)
            seq = measured[label].seq
            rows.append(
                [
                    f"`{label}`",
                    f"{run} ({seq} tokens)",
                    format_bytes(t.extra_bytes),
                    spared_text(t),
                ]
            )
    header = ["policy", "sequence", "memory above nothing_saveable", "recompute spared"]
    return Table(header, rows, align=["left", "left", "right", "right"])


def square_share(m: Measured, seq: int) -> float:
    """The share of one layer's kept bytes held in arrays with two sequence-long axes."""
    square = sum(r.nbytes for r in m.kept if list(r.shape).count(seq) >= 2)
    return square / m.kept.nbytes if m.kept.nbytes else 0.0


# --- the same trade, recorded on a GPU ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RecordedTrade:
    """Two policies' device temporaries and step times from a committed GPU run of the sharded
    step's recorder (:mod:`examples.howto.offload`, data under ``examples/data/offload``)."""

    device: str
    jax: str
    config: Config
    temp_bytes: dict[str, int]
    time: dict[str, Timing]

    def verdict(self, label: str, base: str = "nothing_saveable") -> str:
        """``label`` against ``base``: memory as a ratio, time by :meth:`Timing.compare`."""
        t, b = self.time[label], self.time[base]
        ratio = self.temp_bytes[label] / self.temp_bytes[base]
        return (
            f"on an {self.device} (jax {self.jax}), {label} needed "
            f"{format_bytes(self.temp_bytes[label])} of device temporaries against "
            f"{format_bytes(self.temp_bytes[base])} for {base} ({ratio:.1f} times), at "
            f"{t} per step against {b}: {t.compare(b)}"
        )


def recorded_gpu_trades(
    labels: Sequence[str] = ("nothing_saveable", "dots_with_no_batch_dims_saveable"),
) -> list[RecordedTrade]:
    """The committed GPU runs that timed every one of ``labels``."""
    from examples.howto import offload

    trades = []
    for run in offload.load_all():
        by_policy = {r.policy: r for r in run.results}
        steps = {label: by_policy[label].step if label in by_policy else None for label in labels}
        if all(steps.values()):
            trades.append(
                RecordedTrade(
                    device=run.runinfo["device"],
                    jax=run.runinfo["jax"],
                    config=run.config,
                    temp_bytes={label: by_policy[label].temp_bytes for label in labels},
                    time={label: Timing(**(steps[label] or {})) for label in labels},
                )
            )
    return trades


# --- what a policy sees of the attention ---------------------------------------------------------


def attention_products(cfg: Config = SHORT) -> list[tuple[str, bool]]:
    """The ``dot_general`` equations of one ``jax.nn.dot_product_attention`` call as traced here:
    each one's output type and whether it has batch dimensions."""
    q = jnp.zeros((cfg.batch, cfg.seq, cfg.heads, cfg.width // cfg.heads), DTYPE)
    jaxpr = jax.make_jaxpr(jax.nn.dot_product_attention)(q, q, q)
    found = []
    for eqn, _ in walk(jaxpr):
        if eqn.primitive.name == "dot_general":
            (_, (lhs_batch, _)) = eqn.params["dimension_numbers"]
            found.append((eqn.outvars[0].aval.str_short(short_dtypes=True), bool(lhs_batch)))
    return found


def attention_crossover(cfg: Config, mlp: Mlp = "gelu") -> int:
    """The sequence length from which the attention's two products (4·s·d FLOPs a token) cost
    more than the block's products with its weights: (8 + 4·r)·d² a token with a two-matrix MLP
    of ratio r, (8 + 6·r)·d² with a gated one (three matrices)."""
    if mlp == "gated":
        return int((2 + 1.5 * cfg.mlp_ratio) * cfg.width)
    return (2 + cfg.mlp_ratio) * cfg.width


def product_flops(cfg: Config, mlp: Mlp = "gelu") -> dict[str, float]:
    """XLA's FLOP count of one layer's forward products, from the compiled programs: the
    attention's two (queries × keys, probabilities × values) and the products with the weights
    (the forward pass of the block less the attention's). A check on
    :func:`attention_crossover`'s arithmetic, by the compiler's count."""
    params, x = init(cfg, mlp)
    one_layer = jax.tree.map(lambda w: w[0].astype(jnp.float32), params)
    x = x.astype(jnp.float32)
    b, s, d = x.shape
    q = jnp.zeros((b, s, cfg.heads, d // cfg.heads), jnp.float32)

    def flops(f: Callable[..., Any], *args: Any) -> float:
        cost = compat.cost_analysis(jax.jit(f).lower(*args).compile())
        return float(cost["flops"]) if cost else 0.0

    def products(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k)
        return jnp.einsum("bhqk,bkhd->bqhd", logits, v)

    def weights_only(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
        out = (h @ p["wqkv"])[..., :d] @ p["wo"]
        if mlp == "gated":
            return out + ((h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]
        return out + (h @ p["w1"]) @ p["w2"]

    return {
        "attention": flops(products, q, q, q),
        "weights": flops(weights_only, x, one_layer),
    }


def recomputed_products(cfg: Config, policy: Any, attention: Attention) -> int:
    """``dot_general`` equations in the backward pass's checkpoint equation (recomputation and
    the backward products together): fewer means less recomputed, for the same block."""
    from examples.tools.jaxprs import traced_remat_sites

    params, x = init(cfg)
    sites = traced_remat_sites(jax.grad(make_loss(cfg, policy, attention)), params, x)
    return sum(site.products for site in sites)
