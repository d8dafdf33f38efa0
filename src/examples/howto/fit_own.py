"""How-to "Will it fit?": a reader's own step through the one call, in plain JAX and Flax NNX.

:func:`examples.tools.plans.plan` takes ``make_step(policy)``, a function that returns the
jittable step for one policy (:data:`~examples.tools.plans.NO_REMAT` meaning no
``jax.checkpoint``), the step's arguments (shapes, or concrete arrays whose shapes are used),
targets and policies, and returns a table of the compilers' plans. The page calls it on the two
steps below, on the CPU target in every build and on the GPU and TPU targets where their
compilers are installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from examples.tools.plans import NO_REMAT
from examples.tools.targets import TARGETS, compiler_available

P = jax.checkpoint_policies

#: The policies the page plans for a reader's own step.
OWN_POLICIES: dict[str, Any] = {
    "no remat": NO_REMAT,
    "dots_with_no_batch_dims_saveable": P.dots_with_no_batch_dims_saveable,
    "nothing_saveable": P.nothing_saveable,
}


def installed_targets(wanted: tuple[str, ...] = ("h100-80gb", "tpu-v5e:1x1")) -> list[str]:
    """``"cpu"`` and those of ``wanted`` whose compiler is installed here."""
    return ["cpu", *(t for t in wanted if t in TARGETS and compiler_available(t))]


# --- a plain JAX step ----------------------------------------------------------------------------


def plain_step(policy: Any) -> Callable[..., Any]:
    """The loss and gradient of a scan over tanh layers, the scanned layer checkpointed."""

    def loss(w: jax.Array, x: jax.Array) -> jax.Array:
        def layer(h: jax.Array, wi: jax.Array) -> tuple[jax.Array, None]:
            return jnp.tanh(h @ wi), None

        if policy is not NO_REMAT:
            layer = jax.checkpoint(layer, policy=policy)
        return jnp.mean(jax.lax.scan(layer, x, w)[0] ** 2)

    return jax.value_and_grad(loss)


# --- a Flax NNX model ----------------------------------------------------------------------------


class Block(nnx.Module):
    """A residual MLP block."""

    def __init__(self, width: int, rngs: nnx.Rngs) -> None:
        self.up = nnx.Linear(width, 4 * width, rngs=rngs)
        self.down = nnx.Linear(4 * width, width, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.down(jax.nn.gelu(self.up(x)))


class Model(nnx.Module):
    """Blocks in a Python loop; ``policy`` decides whether each block's call is an ``nnx.remat``."""

    def __init__(self, depth: int, width: int, rngs: nnx.Rngs) -> None:
        self.blocks = nnx.List([Block(width, rngs) for _ in range(depth)])

    def __call__(self, x: jax.Array, policy: Any = NO_REMAT) -> jax.Array:
        for block in self.blocks:
            if policy is NO_REMAT:
                x = block(x)
            else:
                x = nnx.remat(Block.__call__, policy=policy)(block, x)
        return x


def nnx_make_step(graphdef: Any) -> Callable[[Any], Callable[..., Any]]:
    """``make_step(policy)`` for an NNX model split into ``graphdef`` and its state: the step
    takes the state (a pytree of arrays, what :func:`~examples.tools.plans.plan` shards) and a
    batch, and returns the loss and the state's gradient."""

    def make_step(policy: Any) -> Callable[..., Any]:
        def step(state: Any, x: jax.Array) -> Any:
            def loss(state: Any) -> jax.Array:
                return jnp.mean(nnx.merge(graphdef, state)(x, policy) ** 2)

            return jax.value_and_grad(loss)(state)

        return step

    return make_step
