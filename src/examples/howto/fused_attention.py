"""How-to (``docs/howto/choose-policy.md``): what a checkpoint policy can and cannot see of a fused
attention kernel.

The kernel is JAX's Pallas flash attention, run in interpret mode so that the CPU can trace it: a
``custom_vjp`` whose forward and backward are ``pallas_call`` kernels. The page checkpoints one call
of it under each policy of :data:`FLASH_CASES` and counts what it keeps and how often the forward
kernel runs.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.howto.choose_policy import DTYPE, NO_REMAT, P
from examples.tools import compat
from examples.tools.display import Table
from examples.tools.jaxprs import walk
from examples.tools.residuals import saved_residuals

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


def flash_loss(
    policy: Any, name_output: bool = False, squared: bool = False
) -> Callable[..., jax.Array]:
    """A loss around one fused attention call, checkpointed with ``policy`` (or not at all).

    ``name_output`` tags the kernel's output ``"attn_out"`` with ``checkpoint_name``. The loss is
    the sum of the output, linear, so that the listing shows only what the attention keeps; with
    ``squared`` it is the sum of its squares, whose derivative reads the output, as the out
    projection after an attention does.
    """
    mha = flash_attention()

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        out: jax.Array = mha(q, k, v)
        out = checkpoint_name(out, "attn_out") if name_output else out
        return jnp.square(out.astype(jnp.float32)) if squared else out

    fn = attend if policy is NO_REMAT else jax.checkpoint(attend, policy=policy)
    return lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32))


#: ``save_custom_vjp_outputs`` combined with a names policy that names the kernel's output.
BOTH_FLASH_POLICY = P.save_from_both_policies(
    P.save_only_these_names("attn_out"), save_custom_vjp_outputs
)


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
