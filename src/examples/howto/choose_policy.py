"""How-to: choose a checkpoint policy for a transformer block.

The code of ``docs/howto/choose-policy.md``, in the order of the page. The block is the one of
:func:`examples.tools.models.named_block` in the shape of production models: bfloat16 weights
and activations (many trainers keep float32 master weights; the page says so),
``jax.nn.dot_product_attention``, an MLP of ratio 4, scanned over its layers. Each
candidate policy is compiled at a short and a long sequence, and the page reads XLA's memory and
FLOPs and the step time off the build. The last part looks at a fused attention kernel (JAX's Pallas
flash attention, run in interpret mode so that the CPU can trace it) to show what a policy can
and cannot see of one.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import jax
import jax.export  # an attribute of jax only once imported, on older releases
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.tools import compat
from examples.tools.display import Table, format_bytes, format_ratio
from examples.tools.jaxprs import walk
from examples.tools.measure import (
    MIN_REPEATS,
    CompiledStats,
    Timing,
    compile_for_analysis,
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


def init(cfg: Config) -> tuple[dict[str, jax.Array], jax.Array]:
    """bfloat16 weights (stacked over layers) and a bfloat16 batch of inputs."""
    params = jax.tree.map(lambda w: w.astype(DTYPE), init_params(cfg))
    return params, init_inputs(cfg).astype(DTYPE)


def layer_fn(
    cfg: Config, policy: Any, attention: Attention = "dot_product_attention"
) -> Callable[[jax.Array, Any], jax.Array]:
    """One layer's block; checkpointed with ``policy`` unless ``policy`` is :data:`NO_REMAT`."""
    layer: Callable[[jax.Array, Any], jax.Array] = functools.partial(
        block, heads=cfg.heads, attention=attention
    )
    return layer if policy is NO_REMAT else jax.checkpoint(layer, policy=policy, prevent_cse=False)


def make_loss(
    cfg: Config, policy: Any, attention: Attention = "dot_product_attention"
) -> Callable[[Any, jax.Array], jax.Array]:
    """Scan the block over the layers; the loss is the mean square of the output, in float32."""
    layer = layer_fn(cfg, policy, attention)

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
) -> dict[str, Measured]:
    """Compile ``jax.value_and_grad`` of the scanned loss for each candidate, and time the
    compiled steps in turns (:func:`examples.tools.measure.time_interleaved`)."""
    params, x = init(cfg)
    one_layer = jax.tree.map(lambda w: w[0], params)
    labels = list(labels or CANDIDATES)
    steps = {label: jax.value_and_grad(make_loss(cfg, CANDIDATES[label])) for label in labels}
    compiled, times = {}, {}
    if timed:  # compiled as they run; the figures are read off the executables timed
        compiled = {label: jax.jit(s).lower(params, x).compile() for label, s in steps.items()}
        times = time_interleaved(compiled, params, x, repeats=repeats)
    out = {}
    for label in labels:
        kept = saved_residuals(layer_fn(cfg, CANDIDATES[label]), x, one_layer)
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


def attention_crossover(cfg: Config) -> int:
    """The sequence length from which the attention's two products (4·s·d FLOPs a token) cost
    more than the block's products with its weights ((8 + 4·mlp_ratio)·d² a token)."""
    return (2 + cfg.mlp_ratio) * cfg.width


def recomputed_products(cfg: Config, policy: Any, attention: Attention) -> int:
    """``dot_general`` equations in the backward pass's checkpoint equation (recomputation and
    the backward products together): fewer means less recomputed, for the same block."""
    from examples.tools.jaxprs import traced_remat_sites

    params, x = init(cfg)
    sites = traced_remat_sites(jax.grad(make_loss(cfg, policy, attention)), params, x)
    return sum(site.products for site in sites)


# --- a fused attention kernel --------------------------------------------------------------------


#: The deprecation JAX attaches to the Pallas attention module from jax 0.12 on; it points to
#: tokamax (a separate package of Pallas kernels), which this site does not install.
PALLAS_DEPRECATION = "jax.experimental.pallas.ops.gpu.attention is deprecated"


@functools.cache
def pallas_attention() -> tuple[ModuleType, str | None]:
    """JAX's Pallas attention module, and the deprecation message its import gave (or ``None``).

    The module still works where it is deprecated, and it is the fused kernel the CPU can trace;
    its deprecation is caught here, by its message only, so that the page can say it is deprecated
    rather than have the warning fail the build (other warnings pass through).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from jax.experimental.pallas.ops.gpu import attention
    message = None
    for w in caught:
        if issubclass(w.category, DeprecationWarning) and PALLAS_DEPRECATION in str(w.message):
            message = str(w.message)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return attention, message


def flash_attention() -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """JAX's Pallas flash attention (``jax.experimental.pallas.ops.gpu.attention.mha``) in
    interpret mode: a ``custom_vjp`` whose forward and backward are ``pallas_call`` kernels."""
    attention, _ = pallas_attention()
    scale = FLASH_SHAPE[-1] ** -0.5  # as jax.nn.dot_product_attention scales by default
    return functools.partial(attention.mha, segment_ids=None, sm_scale=scale, interpret=True)


#: The name of the primitive a ``jax.custom_vjp`` call traces to. It is JAX's internal name, not
#: an API: the tests check on every release that a policy matching it still keeps the kernel's
#: residuals.
CUSTOM_VJP_PRIMITIVE = "custom_vjp_call"


def save_custom_vjp_outputs(prim: Any, *_: Any, **__: Any) -> bool:
    """A policy: keep whatever a ``custom_vjp`` function (a fused kernel) returns."""
    return bool(prim.name == CUSTOM_VJP_PRIMITIVE)


#: The shape the kernel is traced at: one sequence of 128 tokens (its block size), 2 heads of 64.
FLASH_SHAPE = (1, 128, 2, 64)


def flash_inputs() -> tuple[jax.Array, jax.Array, jax.Array]:
    keys = jax.random.split(jax.random.key(3), 3)
    q, k, v = (jax.random.normal(key, FLASH_SHAPE, DTYPE) for key in keys)
    return q, k, v


def flash_loss(policy: Any, name_output: bool = False) -> Callable[..., jax.Array]:
    """A loss around one fused attention call, checkpointed with ``policy`` (or not at all).

    ``name_output`` tags the kernel's output ``"attn_out"`` with ``checkpoint_name``.
    """
    mha = flash_attention()

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        out: jax.Array = mha(q, k, v)
        return checkpoint_name(out, "attn_out") if name_output else out

    fn = attend if policy is NO_REMAT else jax.checkpoint(attend, policy=policy)
    # A linear loss, so that the listing shows only what the attention keeps.
    return lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32))


#: What the page tries on the fused kernel: label -> (policy, name the output?).
FLASH_CASES: dict[str, tuple[Any, bool]] = {
    NO_REMAT: (NO_REMAT, False),
    "nothing_saveable": (P.nothing_saveable, False),
    "dots_saveable": (P.dots_saveable, False),
    'save_only_these_names("attn_out")': (P.save_only_these_names("attn_out"), True),
    "save_custom_vjp_outputs": (save_custom_vjp_outputs, False),
}


def flash_table() -> Table:
    """For each case: what the checkpointed attention keeps, and how often the forward kernel
    runs in one gradient."""
    args = flash_inputs()
    rows = []
    for label, (policy, name_output) in FLASH_CASES.items():
        loss = flash_loss(policy, name_output)
        kept = saved_residuals(loss, *args).excluding_arguments()
        runs = kernel_runs(loss, *args).count("mha_forward")
        shown = ", ".join(f"`{r.type_str}`" for r in kept) or "nothing"
        rows.append([f"`{label}`", shown, runs])
    return Table(["policy", "kept (besides the arguments)", "forward kernel runs"], rows)


def kernel_runs(loss: Callable[..., jax.Array], *args: jax.Array) -> list[str]:
    """The names of the ``pallas_call`` kernels in a training step's ``jax.value_and_grad(loss)``,
    in program order.

    The step returns the loss, as training steps do: under ``jax.grad`` alone the forward pass of
    a checkpointed kernel computes a value nothing reads, and JAX's dead-code elimination drops it.
    """
    step = jax.value_and_grad(loss, argnums=tuple(range(len(args))))
    jaxpr = jax.make_jaxpr(step)(*args)
    return [
        compat.pallas_kernel_name(eqn)
        for eqn, _ in walk(jaxpr)
        if eqn.primitive.name == "pallas_call"
    ]


# --- host offload ---------------------------------------------------------------------------------


def offload_policy(names: Sequence[str] = KEEP_NAMES) -> Any:
    """The names policy with its values kept in host memory instead of the device's."""
    return P.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=list(names),
        offload_src="device",
        offload_dst="pinned_host",
    )


@dataclasses.dataclass(frozen=True)
class OffloadCheck:
    """What each stage makes of the offloading policy, on this backend and for others."""

    kept: Residuals  #: what one layer keeps (the memory kind is in each value's type)
    to_host_bytes: int  #: bytes the traced step asks to send to host memory
    placements: dict[str, int]  #: placement annotations in the step lowered for each platform
    host_buffers: int  #: arrays in host memory in the step compiled for this backend
    stats: CompiledStats  #: this backend's compiled step
    on_device: CompiledStats  #: the same names kept in device memory, for comparison


def offload_check(cfg: Config, platforms: Sequence[str] = ("cpu", "cuda")) -> OffloadCheck:
    """Follow :func:`offload_policy` from the trace to the compiled step of this backend."""
    from examples.howto import offload

    params, x = init(cfg)
    one_layer = jax.tree.map(lambda w: w[0], params)
    policy = offload_policy()
    step = jax.value_and_grad(make_loss(cfg, policy))
    transfers = offload.host_transfers(jax.make_jaxpr(step)(params, x))
    # Releases before 0.6 refuse to export the placement custom call unless told to allow it.
    allow = [jax.export.DisabledSafetyCheck.custom_call("annotate_device_placement")]
    export = functools.partial(jax.export.export, jax.jit(step), disabled_checks=allow)
    placements = {
        p: offload.placement_annotations(str(export(platforms=[p])(params, x).mlir_module()))
        for p in platforms
    }
    compiled = compile_for_analysis(jax.jit(step).lower(params, x))
    names = jax.value_and_grad(make_loss(cfg, P.save_only_these_names(*KEEP_NAMES)))
    return OffloadCheck(
        saved_residuals(layer_fn(cfg, policy), x, one_layer).excluding_arguments(),
        transfers.to_host_bytes,
        placements,
        offload.host_buffers(str(compiled.as_text())),
        stats_of(compiled),
        compiled_stats(names, params, x),
    )
