"""Remat mistakes seen in real projects, each measured rather than told.

Backs ``docs/explorer/pitfalls.md``; tested in ``tests/test_pitfalls.py``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from examples.measure import CompiledStats, compiled_stats
from examples.residuals import Residuals, saved_residuals

P = jax.checkpoint_policies


def mlp_layer(w: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.tanh(x @ w)


def mlp_inputs(width: int = 256, batch: int = 64, stages: int = 4, seed: int = 0):
    kw, kx = jax.random.split(jax.random.key(seed))
    w = jax.random.normal(kw, (stages, width, width)) / jnp.sqrt(width)
    return w, jax.random.normal(kx, (stages, batch, width))


# --- 1. vmap gives every product a batch dimension -----------------------------------------------


def vmapped_stages(policy: Any) -> tuple[Residuals, Residuals]:
    """Residuals of one stage run alone, and of all stages run with ``jax.vmap``.

    Both apply ``jax.checkpoint(mlp_layer, policy=policy)``; pipelining code often maps stages
    like this, with a leading stage axis on weights and activations.
    """
    w, x = mlp_inputs()
    layer = jax.checkpoint(mlp_layer, policy=policy)
    alone = saved_residuals(lambda w, x: jnp.sum(layer(w, x)), w[0], x[0])
    mapped = saved_residuals(lambda w, x: jnp.sum(jax.vmap(layer)(w, x)), w, x)
    return alone, mapped


# --- 2. checkpointing the whole function, or its last stage --------------------------------------


def _three_stages(w: jax.Array, x: jax.Array, wrap: str) -> jax.Array:
    stages = [mlp_layer, mlp_layer, mlp_layer]
    if wrap == "first two stages":
        first = jax.checkpoint(lambda w, x: mlp_layer(w[1], mlp_layer(w[0], x)))
        return jnp.mean(mlp_layer(w[2], first(w, x)) ** 2)
    if wrap == "last stage":
        stages[2] = jax.checkpoint(mlp_layer)
    for i, stage in enumerate(stages):
        x = stage(w[i], x)
    return jnp.mean(x**2)


PLACEMENTS = ("nowhere", "whole function", "last stage", "first two stages")


def placement_costs(
    value_and_grad: bool = False,
) -> dict[str, tuple[Residuals, CompiledStats]]:
    """Residuals kept, and XLA's memory and FLOPs, for each placement of ``jax.checkpoint``.

    With ``value_and_grad`` the compiled function returns the loss as well as the gradient, as a
    training step does; with ``jax.grad`` alone the loss is dead code that XLA may delete.
    """
    w, x = mlp_inputs(stages=3)
    x = x[0]
    differentiate = jax.value_and_grad if value_and_grad else jax.grad
    out = {}
    for where in PLACEMENTS:
        if where == "whole function":
            f = jax.checkpoint(lambda w, x: _three_stages(w, x, "nowhere"))
        else:
            f = lambda w, x, where=where: _three_stages(w, x, where)
        out[where] = (saved_residuals(f, w, x), compiled_stats(differentiate(f), w, x))
    return out


# --- 3. policy=None ------------------------------------------------------------------------------


def none_versus_named_policies() -> dict[str, Residuals]:
    """``policy=None`` next to ``everything_saveable`` and ``nothing_saveable``."""
    w, x = mlp_inputs(stages=2)
    two = lambda w, x: jnp.mean(mlp_layer(w[1], mlp_layer(w[0], x[0])) ** 2)
    return {
        "policy=None": saved_residuals(jax.checkpoint(two, policy=None), w, x),
        "everything_saveable": saved_residuals(
            jax.checkpoint(two, policy=P.everything_saveable), w, x
        ),
        "nothing_saveable": saved_residuals(jax.checkpoint(two, policy=P.nothing_saveable), w, x),
    }


# --- 4. checkpoint inside or outside lax.scan ----------------------------------------------------


def scan_placement(depth: int = 16, batch: int = 64, width: int = 256) -> dict[str, CompiledStats]:
    """XLA's memory and FLOPs: checkpoint on the scanned body, around the scan, or absent."""
    kw, kx = jax.random.split(jax.random.key(0))
    w = jax.random.normal(kw, (depth, width, width)) / jnp.sqrt(width)
    x = jax.random.normal(kx, (batch, width))

    def net(body):
        def loss(w, x):
            y, _ = jax.lax.scan(lambda h, wi: (body(wi, h), None), x, w)
            return jnp.mean(y**2)

        return loss

    variants = {
        "no checkpoint": net(mlp_layer),
        "checkpoint around the scan": jax.checkpoint(net(mlp_layer)),
        "checkpoint on the scanned body": net(jax.checkpoint(mlp_layer)),
    }
    return {name: compiled_stats(jax.grad(f), w, x) for name, f in variants.items()}
