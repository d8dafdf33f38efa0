"""Problem ``scan_remat_body``: layers applied with ``jax.lax.scan``, the scanned body checkpointed.

Layer ``l`` computes ``h <- tanh(h @ ws[l] + bs[l])``; ``jax.lax.scan`` applies the ``L`` layers
to ``x`` in turn, and the function returns ``sum(h_L ** 2)``. The solution wraps the scanned
function (one layer) in ``jax.checkpoint``, not the scan: the backward pass then keeps one carry
per layer and recomputes each layer's inside from it, one layer at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from examples.problems._spec import Case, Problem, normal
from examples.tools.jaxprs import primitive_counts
from examples.tools.measure import CompiledStats, compiled_stats
from examples.tools.models import rms_norm

# -- the reference solution -----------------------------------------------------------------------


def scan_remat_body(ws: jax.Array, bs: jax.Array, x: jax.Array) -> jax.Array:
    """``sum(h_L ** 2)`` for ``h <- tanh(h @ w + b)`` scanned over the layers, each checkpointed."""

    @jax.checkpoint
    def layer(h: jax.Array, wb: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        w, b = wb
        return jnp.tanh(h @ w + b), None

    h, _ = jax.lax.scan(layer, x, (ws, bs))
    return jnp.sum(h**2)


# -- the float64 reference, in NumPy --------------------------------------------------------------


def reference_f64(
    ws: ArrayLike, bs: ArrayLike, x: ArrayLike
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The value and its gradients with respect to (ws, bs, x), by hand, in float64.

    With ``z_l = h_l w_l + b_l``, ``h_{l+1} = tanh(z_l)`` and ``L = sum(h_L**2)``:
    ``dL/dh_L = 2 h_L``; then, layer by layer from the last, ``dL/dz_l = dL/dh_{l+1} *
    (1 - h_{l+1}**2)``, ``dL/dw_l = h_l^T dL/dz_l``, ``dL/db_l = sum over rows of dL/dz_l`` and
    ``dL/dh_l = dL/dz_l w_l^T``.
    """
    ws, bs, x = (np.asarray(v, dtype=np.float64) for v in (ws, bs, x))
    hs = [x]
    for w, b in zip(ws, bs, strict=True):
        hs.append(np.tanh(hs[-1] @ w + b))
    grad_h = 2.0 * hs[-1]
    grad_ws, grad_bs = np.zeros_like(ws), np.zeros_like(bs)
    for layer in reversed(range(len(ws))):
        dz = grad_h * (1.0 - hs[layer + 1] ** 2)
        grad_ws[layer] = hs[layer].T @ dz
        grad_bs[layer] = dz.sum(axis=0)
        grad_h = dz @ ws[layer].T
    return np.asarray(np.sum(hs[-1] ** 2)), (grad_ws, grad_bs, grad_h)


# -- inputs ----------------------------------------------------------------------------------------

#: (L, N, d) of the checked inputs: stacks of several depths (one layer too), batches and widths.
#: The first is the one whose kept values the residuals check compares, so it has several layers.
SHAPES = ((3, 4, 4), (1, 1, 3), (8, 16, 8), (4, 5, 32))


def make_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for layers, n, d in SHAPES:
        ws = normal(rng, (layers, d, d), d**-0.5)
        bs = normal(rng, (layers, d), 0.1)
        x = normal(rng, (n, d))
        value, grads = reference_f64(ws, bs, x)
        cases.append(
            Case(
                args=(ws, bs, x),
                label=f"L={layers}, N={n}, d={d}",
                expected=value,
                expected_grads=grads,
                cotangent=np.asarray(1.0),
            )
        )
    return cases


PROBLEM = Problem(
    name="scan_remat_body",
    position=4,
    title="Checkpoint the scanned layer, not the scan",
    topic="jax.checkpoint with jax.lax.scan",
    difficulty="medium",
    arg_names=("ws", "bs", "x"),
    returns="a float32 scalar, sum(h ** 2) of the last layer's output h",
    reference=scan_remat_body,
    make_cases=make_cases,
    array_args=(0, 1, 2),
    output_shape=lambda case: (),
    required_policy=None,
    products_inside=1,
    inside_scan=True,
)


# -- for the page: a deeper block, checkpointed in three places ----------------------------------


def scan_model(
    step: Callable[[jax.Array, Any], tuple[jax.Array, None]], checkpoint_scan: bool = False
) -> Any:
    """``loss(params, x)`` of a model: an input layer, ``step`` scanned over the stacked
    ``params["layers"]``, an output layer, and the mean square of the result.

    ``checkpoint_scan=True`` puts ``jax.checkpoint`` around the scan (and only the scan).
    """

    def layers(stacked: Any, h: jax.Array) -> jax.Array:
        h, _ = jax.lax.scan(step, h, stacked)
        return h

    if checkpoint_scan:
        layers = jax.checkpoint(layers)

    def loss(params: Any, x: jax.Array) -> jax.Array:
        h = jnp.tanh(x @ params["w_in"])
        h = layers(params["layers"], h)
        return jnp.mean((h @ params["w_out"]) ** 2)

    return loss


def model_params(layers: Any, width: int, seed: int = 1) -> dict[str, Any]:
    """``{"w_in", "layers", "w_out"}`` for :func:`scan_model`, around stacked ``layers``."""
    k_in, k_out = jax.random.split(jax.random.key(seed))
    scale = width**-0.5
    return {
        "w_in": jax.random.normal(k_in, (width, width)) * scale,
        "layers": layers,
        "w_out": jax.random.normal(k_out, (width, width)) * scale,
    }


def partly_checkpointed_step(h: jax.Array, p: dict[str, jax.Array]) -> tuple[jax.Array, None]:
    """:func:`~examples.problems.checkpoint_dot_policy.mlp_block` with only its normalization
    and first product checkpointed; the GELU and the second product are not."""
    up = jax.checkpoint(lambda h, w1: rms_norm(h) @ w1)(h, p["w1"])
    return h + jax.nn.gelu(up) @ p["w2"], None


def python_loop_model(step: Callable[[jax.Array, Any], tuple[jax.Array, None]]) -> Any:
    """:func:`scan_model` with a Python ``for`` loop over the layers instead of ``jax.lax.scan``."""

    def loss(params: Any, x: jax.Array) -> jax.Array:
        h = jnp.tanh(x @ params["w_in"])
        stacked = params["layers"]
        for i in range(jax.tree.leaves(stacked)[0].shape[0]):
            h, _ = step(h, jax.tree.map(lambda layer, i=i: layer[i], stacked))
        return jnp.mean((h @ params["w_out"]) ** 2)

    return loss


def gradient_costs(models: dict[str, Any], params: Any, x: jax.Array) -> dict[str, CompiledStats]:
    """XLA's figures for the gradient of each model's loss with respect to the parameters."""
    return {name: compiled_stats(jax.grad(loss), params, x) for name, loss in models.items()}


def traced_size(loss: Any, params: Any, x: jax.Array) -> tuple[int, int]:
    """(equations, matrix products) in the traced gradient of ``loss``, nested jaxprs included."""
    counts = primitive_counts(jax.make_jaxpr(jax.grad(loss))(params, x).jaxpr)
    return sum(counts.values()), counts["dot_general"]


def page_inputs(
    layers: int = 4, n: int = 8, d: int = 4, seed: int = 0
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Fixed inputs of the problem's shape for the page's cells."""
    rng = np.random.default_rng(seed)
    return (
        normal(rng, (layers, d, d), d**-0.5),
        normal(rng, (layers, d), 0.1),
        normal(rng, (n, d)),
    )
