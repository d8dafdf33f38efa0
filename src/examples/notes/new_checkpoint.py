"""The migration notes' examples: JAX's new ``jax.checkpoint`` (PR 11830), checked on today's JAX.

Each function here backs one point of ``docs/notes/new-checkpoint-implementation.md`` and is
tested in ``tests/notes/test_new_checkpoint.py``, in the order of the page. Where the page shows an
error, its cell calls JAX directly on the functions defined here (a ``raises-exception`` cell), and
the tests make the same call under ``pytest.raises``.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.tools.display import Table
from examples.tools.measure import compiled_stats
from examples.tools.paths import scrub_paths
from examples.tools.residuals import Residuals, saved_residuals
from examples.tutorial.traced import layer, predict

# --- 1. The switch that is gone ------------------------------------------------------------------

#: The three ways jax <= 0.3.16 offered to turn the new implementation off.
OLD_SWITCHES = {
    "environment variable": "JAX_NEW_CHECKPOINT=0",
    "config update": "jax.config.update('jax_new_checkpoint', False)",
    "absl flag": "--jax_new_checkpoint=False",
}


def config_knows(option: str) -> bool:
    """Whether the installed JAX has a config option of this name (flags and env vars included).

    Config options double as environment variables and absl flags, so an unknown option is
    unknown all three ways.
    """
    return hasattr(jax.config, option)


def old_environment_variable_effect() -> str:
    """Start Python with ``JAX_NEW_CHECKPOINT=0`` and report whether JAX notices.

    Returns the child's report: the JAX version and the primitives it traces, which are the same
    as without the variable when the variable is ignored.
    """
    child = (
        "import jax, jax.numpy as jnp\n"
        "jaxpr = jax.make_jaxpr(jax.grad(jax.checkpoint(jnp.sin)))(1.0)\n"
        "prims = sorted({e.primitive.name for e in jaxpr.eqns})\n"
        "print(jax.__version__, prims)\n"
    )
    env = {**os.environ, "JAX_NEW_CHECKPOINT": "0", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        return "error: " + scrub_paths(done.stderr.strip().splitlines()[-1])
    return done.stdout.strip()


def old_absl_flag_effect(flag: str = "--jax_new_checkpoint=False") -> str:
    """Start a program that parses its command line with absl, as JAX's config can, with ``flag``.

    The child calls ``jax.config.config_with_absl()`` and ``absl.app.run``; it prints a line if it
    runs, and absl prints why it stops if it does not. Returns that line.
    """
    child = (
        "import jax\n"
        "from absl import app\n"
        "jax.config.config_with_absl()\n"
        "app.run(lambda argv: print('ran, jax_enable_x64 =', jax.config.jax_enable_x64))\n"
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", child, flag], env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode == 0:
        return done.stdout.strip()
    lines = [line for line in done.stderr.strip().splitlines() if "Flags parsing error" in line]
    last = lines[-1] if lines else done.stderr.strip().splitlines()[-1]
    return f"exit status {done.returncode}: " + scrub_paths(last.strip())


def remat_primitive_names() -> list[str]:
    """The primitives ``jax.grad(jax.checkpoint(sin))`` traces to in this process."""
    jaxpr = jax.make_jaxpr(jax.grad(jax.checkpoint(jnp.sin)))(1.0)
    return sorted({eqn.primitive.name for eqn in jaxpr.eqns})


# --- 2a. Policies --------------------------------------------------------------------------------


# The announcement's `apply_layer` / `predict` network is the tutorial's `layer` / `predict`:
# one definition serves both pages.
apply_layer = layer


predict_keeping_dots = jax.checkpoint(predict, policy=jax.checkpoint_policies.checkpoint_dots)

#: The three ways of running ``predict`` that the page compares.
PREDICT_VARIANTS: dict[str, Callable[..., jax.Array]] = {
    "no checkpoint": predict,
    "jax.checkpoint, no policy": jax.checkpoint(predict),
    "jax.checkpoint, checkpoint_dots": predict_keeping_dots,
}


def predict_inputs(width: int = 4, layers: int = 3, seed: int = 0) -> tuple[list[jax.Array], Any]:
    keys = jax.random.split(jax.random.key(seed), layers + 1)
    params = [jax.random.normal(k, (width, width)) / np.sqrt(width) for k in keys[:-1]]
    return params, jax.random.normal(keys[-1], (width,))


def summed(f: Callable[..., jax.Array]) -> Callable[..., jax.Array]:
    """``f`` with its output summed: a scalar loss to take gradients of (same argument names)."""

    @functools.wraps(f)
    def loss(*args: Any) -> jax.Array:
        return jnp.sum(f(*args))

    return loss


def predict_residuals() -> dict[str, Residuals]:
    params, x = predict_inputs()
    return {name: saved_residuals(summed(f), params, x) for name, f in PREDICT_VARIANTS.items()}


# --- 2b. Constants are rematerialized too --------------------------------------------------------

CONSTANT_SIZE = 1_000_000


def weighted_sum(x: jax.Array) -> jax.Array:
    """``a`` is computed inside the function but does not depend on its argument."""
    a = jnp.sin(jnp.arange(CONSTANT_SIZE, dtype=jnp.float32) / CONSTANT_SIZE)
    return jnp.sum(a * x)


def constant_residuals() -> dict[str, Residuals]:
    return {
        "no checkpoint": saved_residuals(weighted_sum, 2.0),
        "jax.checkpoint": saved_residuals(jax.checkpoint(weighted_sum), 2.0),
    }


def constant_compiled_temp() -> dict[str, int]:
    """XLA's temporary bytes for ``jax.jit(jax.value_and_grad(f))``, ``f`` being
    :func:`weighted_sum` without and with ``jax.checkpoint``: what the compiled step holds."""
    variants = {"no checkpoint": weighted_sum, "jax.checkpoint": jax.checkpoint(weighted_sum)}
    return {
        name: compiled_stats(jax.value_and_grad(f), 2.0).temp_bytes for name, f in variants.items()
    }


# --- 2d. What the simpler internals made possible ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class BatchingDemo:
    """What happened when a function with a custom batching rule ran under ``vmap``."""

    result: np.ndarray
    reference: np.ndarray  #: the same values from a Python loop over the rows
    rule_calls: tuple[int, ...]  #: the batch size the rule was called with, once per trace


def batching_rule_under_checkpoint(rows: int = 3, width: int = 5) -> BatchingDemo:
    """``jax.vmap(jax.checkpoint(f))`` where ``f`` has a ``custom_vmap`` rule.

    The rule computes all the squared norms in one ``einsum`` instead of letting ``vmap`` batch
    ``dot``; it records each call, so that the caller can see that it was used.
    """
    calls: list[int] = []

    @jax.custom_batching.custom_vmap
    def squared_norm(v: jax.Array) -> jax.Array:
        return jnp.dot(v, v)

    @squared_norm.def_vmap
    def _rule(axis_size: int, in_batched: list[bool], v: jax.Array) -> tuple[jax.Array, bool]:
        calls.append(axis_size)
        if not in_batched[0]:
            return jnp.dot(v, v), False
        return jnp.einsum("bi,bi->b", v, v), True

    vs = jnp.arange(rows * width, dtype=jnp.float32).reshape(rows, width) / (rows * width)
    result = jax.vmap(jax.checkpoint(squared_norm))(vs)
    reference = np.array([float(np.dot(v, v)) for v in np.asarray(vs, np.float64)])
    return BatchingDemo(np.asarray(result), reference, tuple(calls))


@jax.custom_vjp
def sin_with_custom_vjp(x: jax.Array) -> jax.Array:
    """``sin`` with a hand-written reverse-mode rule (saves ``cos x`` for the backward pass)."""
    return jnp.sin(x)


sin_with_custom_vjp.defvjp(lambda x: (jnp.sin(x), jnp.cos(x)), lambda cos_x, g: (g * cos_x,))


# --- 3a. Numerics --------------------------------------------------------------------------------


def mlp_loss(params: list[jax.Array], x: jax.Array) -> jax.Array:
    for W in params:
        x = jnp.tanh(x @ W)
    return jnp.mean(x**2)


def mlp_loss_float64(params: list[np.ndarray], x: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """Loss and gradient in NumPy float64, by hand: an independent reference."""
    params = [np.asarray(W, np.float64) for W in params]
    hs = [np.asarray(x, np.float64)]
    for W in params:
        hs.append(np.tanh(hs[-1] @ W))
    out = hs[-1]
    grad_out = 2 * out / out.size
    grads = []
    for W, h_in, h_out in zip(reversed(params), reversed(hs[:-1]), reversed(hs[1:]), strict=True):
        z_bar = grad_out * (1 - h_out**2)
        grads.append(h_in.T @ z_bar)
        grad_out = z_bar @ W.T
    return float(np.mean(out**2)), grads[::-1]


@dataclasses.dataclass(frozen=True)
class Drift:
    """How far float32 gradients computed different ways are from each other and from float64."""

    between_abs: float  #: max |a - b| over pairs of variants and entries
    between_rel: float  #: ``between_abs`` divided by the largest gradient entry
    from_float64: float  #: max error of any variant against float64, relative to the largest entry
    float32_eps: float

    def verdict(self) -> str:
        """One sentence on the comparison, for the page (computed, not typed)."""
        if self.between_abs == 0.0:
            between = "the three float32 gradients are identical, bit for bit"
        else:
            between = (
                f"the float32 gradients differ by at most {self.between_rel / self.float32_eps:.2g}"
                " float32 epsilons (relative to the largest entry)"
            )
        return (
            f"On this build {between}; the worst of them is "
            f"{self.from_float64 / self.float32_eps:.2g} epsilons from the float64 reference."
        )


def drift_variants() -> dict[str, Callable[..., list[jax.Array]]]:
    """The jitted gradients of :func:`mlp_loss` that :func:`numerical_drift` compares."""
    dots = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return {
        "no checkpoint": jax.jit(jax.grad(mlp_loss)),
        "jax.checkpoint": jax.jit(jax.grad(jax.checkpoint(mlp_loss))),
        "jax.checkpoint, keep products": jax.jit(jax.grad(jax.checkpoint(mlp_loss, policy=dots))),
    }


def numerical_drift(width: int = 64, layers: int = 6, batch: int = 32) -> Drift:
    keys = jax.random.split(jax.random.key(1), layers + 1)
    params = [jax.random.normal(k, (width, width)) / np.sqrt(width) for k in keys[:-1]]
    x = jax.random.normal(keys[-1], (batch, width))
    with jax.default_matmul_precision("highest"):
        grads = [[np.asarray(g) for g in v(params, x)] for v in drift_variants().values()]
    _, reference = mlp_loss_float64(params, np.asarray(x))
    scale = max(float(np.max(np.abs(r))) for r in reference)
    between = max(
        float(np.max(np.abs(a - b)))
        for i, one in enumerate(grads)
        for other in grads[i + 1 :]
        for a, b in zip(one, other, strict=True)
    )
    worst = max(
        float(np.max(np.abs(g - r)))
        for variant in grads
        for g, r in zip(variant, reference, strict=True)
    )
    return Drift(between, between / scale, worst / scale, float(np.finfo(np.float32).eps))


# --- 3b. concrete=True is gone: static arguments -------------------------------------------------


def training_branch(x: jax.Array) -> jax.Array:
    return jnp.sin(x) * 2.0


def evaluation_branch(x: jax.Array) -> jax.Array:
    return jnp.cos(x)


def step_body(x: jax.Array, is_training: bool) -> jax.Array:
    """The old pattern's body: a Python ``if`` on a flag argument."""
    if is_training:
        return training_branch(x)
    return evaluation_branch(x)


#: What old code meets once ``concrete=True`` is deleted: ``is_training`` is traced.
step_traced_flag = jax.checkpoint(step_body)


@partial(jax.checkpoint, static_argnums=(1,))
def step(x: jax.Array, is_training: bool) -> jax.Array:
    """The fix: ``is_training`` is static, so the ``if`` sees a Python bool."""
    return step_body(x, is_training)


def parameters(fn: Callable[..., Any]) -> dict[str, str]:
    """``{parameter: annotation}`` of ``fn``'s keyword parameters (as JAX wrote them)."""
    import inspect

    return {
        name: str(p.annotation)
        for name, p in inspect.signature(fn).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def signature_table() -> Table:
    """``jax.checkpoint``'s keyword parameters next to ``jax.remat``'s."""
    ours, theirs = parameters(jax.checkpoint), parameters(jax.remat)
    rows = [
        (f"`{name}`", f"`{ours[name]}`", f"`{theirs[name]}`" if name in theirs else "absent")
        for name in ours
    ]
    return Table(["parameter", "`jax.checkpoint`", "`jax.remat`"], rows, ["left"] * 3)


def concrete_error(wrapper: Callable[..., Any] = jax.checkpoint) -> str:
    """What ``wrapper(sin, concrete=False)`` raises on the installed JAX: ``"Type: first line"``.

    ``"accepted"`` where it does not raise (releases before 0.10 accepted ``concrete=False``).
    """
    try:
        wrapper(jnp.sin, concrete=False)
    except Exception as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return "accepted"


def flax_version() -> str:
    """The installed Flax's version, or ``"not installed"``."""
    from importlib import metadata

    try:
        return metadata.version("flax")
    except metadata.PackageNotFoundError:
        return "not installed"


def flax_passes_concrete() -> bool | None:
    """Whether the installed Flax's lifted ``checkpoint`` (under ``nn.remat`` and
    ``nn.checkpoint``) passes ``concrete=`` on to ``jax.remat``, read from its source (Flax
    before 0.12.2 does); ``None`` without Flax."""
    import inspect

    try:
        from flax.core import lift
    except ImportError:
        return None
    return "concrete=concrete" in inspect.getsource(lift.checkpoint)


def flax_concrete_sentence() -> str:
    """The page's clause on :func:`flax_passes_concrete` with this JAX."""
    passes = flax_passes_concrete()
    if passes is None:
        return "is not installed"
    if not passes:
        return "does not pass `concrete` on"
    outcome = concrete_error(jax.remat)
    if outcome == "accepted":
        return "still passes `concrete` on, which this JAX accepts"
    return f"still passes `concrete` on, which this JAX refuses: {outcome}"


def epsilon(dtype: Any) -> float:
    """The dtype's machine epsilon (the gap between 1 and the next number)."""
    finfo: Any = jnp.finfo  # untyped in JAX
    return float(finfo(dtype).eps)


def prevent_cse_declarations() -> tuple[str, str]:
    """How ``jax.checkpoint`` and ``jax.remat`` annotate ``prevent_cse`` on the installed JAX."""
    return parameters(jax.checkpoint)["prevent_cse"], parameters(jax.remat)["prevent_cse"]


def prevent_cse_recorded(wrapper: Callable[..., Any], prevent_cse: Any) -> Any:
    """The ``prevent_cse`` that ``wrapper(f, prevent_cse=...)`` hands to the traced checkpoint."""
    f = wrapper(lambda a, b: jnp.sin(a * b), prevent_cse=prevent_cse)
    jaxpr = jax.make_jaxpr(f)(1.0, 2.0)
    (eqn,) = jaxpr.jaxpr.eqns
    return eqn.params["prevent_cse"]
