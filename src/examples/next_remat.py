"""JAX's next remat implementation (``jax_remat3``), as the migration notes show it.

The installed JAX carries a second implementation of ``jax.checkpoint`` behind the config flag
``jax_remat3`` (off by default). Each function here backs one claim of the notes' section on it
(``docs/notes/new-checkpoint-implementation.md``) and is tested in ``tests/test_next_remat.py``.
Functions that trace under the flag set it with :func:`examples.jaxprs.remat3`, which restores it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.display import Table
from examples.jaxprs import remat3, traced_remat_sites
from examples.residuals import Residuals, saved_residuals
from examples.tutorial import layer


def two_layers(W: jax.Array, x: jax.Array) -> jax.Array:
    """Two ``sin(W @ x)`` layers; the first one's output is named ``"hidden"``."""
    h = jax.ad_checkpoint.checkpoint_name(layer(W, x), "hidden")
    return jnp.sum(layer(W, h))


def two_layers_inputs(width: int = 4) -> tuple[jax.Array, jax.Array]:
    W = jax.random.normal(jax.random.key(2), (width, width)) / np.sqrt(width)
    return W, jnp.linspace(-1.0, 1.0, width)


def two_layers_grad_float64(W: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d two_layers / d (W, x) by hand, in NumPy float64: an independent reference."""
    W, x = np.asarray(W, np.float64), np.asarray(x, np.float64)
    z1 = W @ x
    h = np.sin(z1)
    z2 = W @ h
    g2 = np.cos(z2)  # d sum(sin(z2)) / d z2
    g_h = W.T @ g2
    g1 = g_h * np.cos(z1)
    return np.outer(g2, h) + np.outer(g1, x), W.T @ g1


def keep_everything(prim: Any, *avals: Any, **params: Any) -> bool:
    """A custom policy in the form ``jax.checkpoint``'s docstring describes: it says "save"."""
    return True


def policies_to_compare() -> dict[str, Callable[..., Any] | None]:
    """The policies the page compares between the two implementations, by the call shown."""
    cp = jax.checkpoint_policies
    return {
        "no policy": None,
        "dots_saveable": cp.dots_saveable,
        'save_only_these_names("hidden")': cp.save_only_these_names("hidden"),
        "everything_saveable": cp.everything_saveable,
        'save_anything_except_these_names("hidden")': cp.save_anything_except_these_names("hidden"),
        "save_from_both_policies(dots_saveable, ...)": cp.save_from_both_policies(
            cp.dots_saveable, cp.save_only_these_names("hidden")
        ),
        "keep_everything (custom function)": keep_everything,
    }


def residuals_of(
    policy: Callable[..., Any] | None, remat3_on: bool, checkpoint: bool = True
) -> Residuals:
    """What the gradient of :func:`two_layers` keeps, with or without ``jax_remat3``."""
    with remat3(remat3_on):  # jax.checkpoint reads the flag when it wraps, so wrap inside
        f = jax.checkpoint(two_layers, policy=policy) if checkpoint else two_layers
        return saved_residuals(f, *two_layers_inputs())


def kept(listing: Residuals) -> str:
    """``"cos, 'hidden', cos"``: what the forward pass computed and kept, in JAX's order."""
    computed = listing.excluding_arguments()
    if not computed:
        return "nothing"
    return ", ".join(f"'{r.name}'" if r.kind == "named" else str(r.detail) for r in computed)


def _code(items: str) -> str:
    return items if items == "nothing" else ", ".join(f"`{i}`" for i in items.split(", "))


def policy_table() -> Table:
    """What each policy keeps of :func:`two_layers` under both implementations."""
    rows = [
        (
            "no `jax.checkpoint` at all",
            *(kept(residuals_of(None, on, False)) for on in (False, True)),
        )
    ]
    for name, policy in policies_to_compare().items():
        rows.append((f"`{name}`", *(_code(kept(residuals_of(policy, on))) for on in (False, True))))
    return Table(["policy", "default (`remat2`) keeps", "`jax_remat3` keeps"], rows)


def barriers(prevent_cse: bool, remat3_on: bool) -> int:
    """Optimization barriers in the lowered gradient of a checkpointed function.

    ``prevent_cse=True`` asks for them: they stop XLA from merging the recomputation with the
    forward pass (common subexpression elimination), which would undo the remat.
    """
    with remat3(remat3_on):
        f = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)), prevent_cse=prevent_cse)
        return jax.jit(jax.grad(f)).lower(1.0).as_text().count("stablehlo.optimization_barrier")


def implementation_by_wrap_time() -> Table:
    """Which primitive a checkpoint traces to, by where the flag stood at wrapping and at tracing.

    ``jax.checkpoint`` reads ``jax_remat3`` when it wraps the function, so a function decorated
    before the flag was set keeps the default implementation.
    """
    W, x = two_layers_inputs()
    rows = []
    for wrapped_on in (False, True):
        with remat3(wrapped_on):
            f = jax.checkpoint(two_layers)
        for traced_on in (False, True):
            with remat3(traced_on):
                (site,) = traced_remat_sites(f, W, x)
            rows.append((_on_off(wrapped_on), _on_off(traced_on), f"`{site.primitive}`"))
    return Table(["flag when wrapped", "flag when traced", "checkpoint traces to"], rows)


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"
