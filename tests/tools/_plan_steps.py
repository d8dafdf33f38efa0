"""The small scanned step that test_plans.py and test_plan_flops.py compile: three tanh layers,
each checkpointed under ``policy`` (or not at all, ``NO_REMAT``), and its weights' shape."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from examples.tools.plans import NO_REMAT


def make_step(policy):
    def loss(w, x):
        def layer(h, wi):
            return jnp.tanh(h @ wi), None

        if policy is not NO_REMAT:
            layer = jax.checkpoint(layer, policy=policy)
        return jnp.sum(jax.lax.scan(layer, x, w)[0] ** 2)

    return jax.grad(loss)


W = jax.ShapeDtypeStruct((3, 64, 64), jnp.float32)
