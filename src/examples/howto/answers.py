"""Answers to questions readers bring from public trackers, measured on the installed JAX.

Each function here backs a short section of a how-to guide that answers one or more of the
questions listed on ``docs/questions.md`` (:mod:`examples.questions`), and the tests in
``tests/howto/test_answers.py`` assert each behaviour, so a release that changes it fails them:

- how often Python callbacks run under a checkpoint (:func:`callback_calls`), and a function
  jitted inside a checkpoint is traced once (:func:`inner_jit_traces`);
- how often a ``jax.custom_vjp`` rule runs under a checkpoint, with and without
  ``optimize_remat`` (:func:`custom_vjp_calls`);
- gradients with and without remat differ in the last bits (:func:`bitwise_differences`);
- second derivatives through a checkpoint (:func:`second_derivatives`);
- naming a scanned body's output does not offload the scan's carry, naming its input at the top
  does (:func:`scan_offload_loss`);
- what a fresh interpreter sees of ``jax.ad_checkpoint`` (:func:`fresh_interpreter`).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name

_CALLS: list[str] = []


def noisy_block(x: jax.Array) -> jax.Array:
    """A block that reports each run of its forward pass through a debug callback."""
    jax.debug.callback(lambda: _CALLS.append("forward"))
    return jnp.sin(jnp.sin(x))


def callback_calls(*, checkpointed: bool, jit: bool = True, nested: bool = False) -> int:
    """How many times :func:`noisy_block`'s callback runs in one gradient of its sum; with
    ``nested``, the block is called inside an outer checkpoint (a loop over layers inside a
    checkpointed pipeline stage, say)."""
    block = jax.checkpoint(noisy_block) if checkpointed else noisy_block
    if nested:
        inner = block
        block = jax.checkpoint(lambda x: jnp.sin(inner(jnp.sin(x))))
    grad = jax.grad(lambda x: block(x).sum())
    if jit:
        grad = jax.jit(grad)
    _CALLS.clear()
    grad(jnp.ones(3)).block_until_ready()
    jax.effects_barrier()
    return len(_CALLS)


def inner_jit_traces(steps: int = 3) -> int:
    """How many times a function jitted inside a checkpoint is traced over ``steps`` gradients
    with new values of the same shape (jax-ml/jax issue 9661 reported one compile per call)."""
    traces: list[int] = []

    @jax.jit
    def inner(a: jax.Array) -> jax.Array:
        traces.append(1)
        return jnp.sum(jnp.sin(a))

    grad = jax.value_and_grad(jax.checkpoint(lambda a: inner(a)))
    for i in range(steps):
        grad(jnp.ones((2, 5)) + i)
    return len(traces)


def make_kernel(log: list[str], *, optimize_remat: bool) -> Callable[[jax.Array], jax.Array]:
    """A ``jax.custom_vjp`` function whose three rules log each run (jax-ml/jax issue 21303)."""

    @jax.custom_vjp
    def kernel(x: jax.Array) -> jax.Array:
        jax.debug.callback(lambda: log.append("f"))
        return jnp.sin(x)

    def kernel_fwd(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        jax.debug.callback(lambda: log.append("fwd"))
        return jnp.sin(x), x

    def kernel_bwd(x: jax.Array, g: jax.Array) -> tuple[jax.Array]:
        jax.debug.callback(lambda: log.append("bwd"))
        return (jnp.cos(x) * g,)

    kernel.defvjp(kernel_fwd, kernel_bwd, optimize_remat=optimize_remat)
    return kernel


def custom_vjp_calls(*, optimize_remat: bool, checkpointed: bool = True) -> tuple[str, ...]:
    """The rules of :func:`make_kernel` that run in one jitted gradient, sorted."""
    log: list[str] = []
    kernel = make_kernel(log, optimize_remat=optimize_remat)
    if checkpointed:
        kernel = jax.checkpoint(kernel)
    jax.jit(jax.grad(lambda x: kernel(x) ** 2))(3.2).block_until_ready()
    jax.effects_barrier()
    return tuple(sorted(log))


def softmax_loss(x: jax.Array, remat: bool) -> jax.Array:
    """jax-ml/jax issue 8702's function: a bfloat16 input shifted, cast up and soft-maxed."""

    def softmax32(v: jax.Array) -> jax.Array:
        return jax.nn.softmax(v.astype(jnp.float32))

    fn = jax.remat(softmax32) if remat else softmax32
    return fn(x + 1)[0]


@dataclasses.dataclass(frozen=True)
class Differences:
    """How two gradients of the same function differ, entry by entry."""

    differing: int
    size: int
    largest: float
    scale: float

    @property
    def relative(self) -> float:
        """The largest difference, relative to the largest gradient entry."""
        return self.largest / self.scale


def bitwise_differences(seed: int = 0, size: int = 1024) -> Differences:
    """Compare the jitted gradients of :func:`softmax_loss` with and without remat."""
    x = np.random.default_rng(seed).random(size).astype(jnp.bfloat16)
    grad = jax.jit(jax.grad(softmax_loss), static_argnums=(1,))
    plain = np.asarray(grad(x, False), np.float64)
    rematted = np.asarray(grad(x, True), np.float64)
    return Differences(
        differing=int(np.sum(plain != rematted)),
        size=size,
        largest=float(np.max(np.abs(plain - rematted))),
        scale=float(np.max(np.abs(plain))),
    )


@jax.custom_jvp
def sine(x: jax.Array) -> jax.Array:
    """``sin`` with a hand-written (and deliberately doubled) derivative rule."""
    return jnp.sin(x)


@sine.defjvp
def _sine_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[Any, Any]:
    (x,), (t,) = primals, tangents
    return sine(x), 2 * jnp.cos(x) * t


def twice_sine(x: jax.Array) -> jax.Array:
    """jax-ml/jax issue 4566's function: a custom rule applied twice."""
    return sine(sine(x))


def second_derivatives(x: float = 2.0) -> tuple[float, float]:
    """``grad(grad(f))`` with and without a checkpoint around ``f`` (:func:`twice_sine`)."""
    with_remat = jax.grad(jax.grad(jax.checkpoint(twice_sine)))(x)
    without = jax.grad(jax.grad(twice_sine))(x)
    return float(with_remat), float(without)


def scanned_body(h: jax.Array, w: jax.Array) -> tuple[jax.Array, None]:
    """One layer of a scan: its input named at the top (the carry it received), a named hidden
    value inside, and a named output that becomes the next carry."""
    h = checkpoint_name(h, "layer_input")
    hidden = checkpoint_name(jnp.sin(h @ w), "hidden")
    out = checkpoint_name(h + hidden @ w, "residual")
    return out, None


def offload_policy(names: Sequence[str]) -> Callable[..., Any]:
    """Offload the values named ``names`` to pinned host memory, recompute everything else."""
    policy: Callable[..., Any] = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=list(names),
        offload_src="device",
        offload_dst="pinned_host",
    )
    return policy


def scan_offload_loss(names: Sequence[str]) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """A loss that scans :func:`scanned_body`, checkpointed with :func:`offload_policy`."""
    body = jax.checkpoint(scanned_body, policy=offload_policy(names))

    def loss(ws: jax.Array, h: jax.Array) -> jax.Array:
        out, _ = jax.lax.scan(body, h, ws)
        return jnp.sum(out)

    return loss


def scan_inputs(layers: int = 3, width: int = 4, batch: int = 2) -> tuple[jax.Array, jax.Array]:
    """Stacked weights and an input for :func:`scan_offload_loss`."""
    return jnp.ones((layers, width, width)) / width, jnp.ones((batch, width))


def fresh_interpreter(code: str, timeout: float = 120) -> str:
    """Run ``code`` in a new Python interpreter (this one's executable) and return what it prints
    (stdout, then the last line of stderr if it failed): what a reader's own script would see."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    out = result.stdout.strip()
    if result.returncode != 0:
        last = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        out = f"{out}\n{last}".strip()
    return out
