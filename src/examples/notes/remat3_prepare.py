"""Preparing code for ``jax_remat3`` (``docs/notes/jax-remat3.md``): name the values a dots
policy would keep and keep them by name, and what an offloading policy keeps with the flag off
and on. The model is :func:`examples.notes.remat3.two_layers`; the flag is set through
:func:`examples.notes.remat3_check.remat3_flag`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from examples.notes.remat3 import two_layers, two_layers_inputs
from examples.notes.remat3_check import remat3_flag as remat3
from examples.tools.residuals import Residuals, saved_residuals


def two_layers_named(W: jax.Array, x: jax.Array) -> jax.Array:
    """:func:`two_layers` with each matrix product named ``"product"`` as well."""
    h = checkpoint_name(jnp.sin(checkpoint_name(W @ x, "product")), "hidden")
    return jnp.sum(jnp.sin(checkpoint_name(W @ h, "product")))


def dots_versus_names(remat3_on: bool) -> tuple[Residuals, Residuals]:
    """What ``dots_saveable`` keeps of :func:`two_layers`, and what
    ``save_only_these_names("product")`` keeps of :func:`two_layers_named`."""
    cp = jax.checkpoint_policies
    W, x = two_layers_inputs()
    with remat3(remat3_on):
        dots = jax.checkpoint(two_layers, policy=cp.dots_saveable)
        names = jax.checkpoint(two_layers_named, policy=cp.save_only_these_names("product"))
        return saved_residuals(dots, W, x), saved_residuals(names, W, x)


def three_sines(x: jax.Array) -> jax.Array:
    """``sin`` three times, the values named ``y``, ``z`` and ``w`` (JAX's offloading example)."""
    y = checkpoint_name(jnp.sin(x), "y")
    z = checkpoint_name(jnp.sin(y), "z")
    return jnp.sum(checkpoint_name(jnp.sin(z), "w"))


def offload_kept(remat3_on: bool) -> str:
    """What ``save_and_offload_only_these_names`` (``y`` kept, ``z`` moved to host memory)
    keeps of :func:`three_sines`, with or without the flag."""
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=["y"],
        names_which_can_be_offloaded=["z"],
        offload_src="device",
        offload_dst="pinned_host",
    )
    with remat3(remat3_on):
        listing = saved_residuals(jax.checkpoint(three_sines, policy=policy), jnp.arange(4.0))
    kept_ = [
        f"{r.type_str} ({'host' if r.on_host else 'device'})" for r in listing.excluding_arguments()
    ]
    return ", ".join(kept_) or "nothing"
