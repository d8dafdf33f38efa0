"""Problem ``checkpoint_dot_policy``: one ``jax.checkpoint`` whose policy keeps the products.

The pipeline is ``sum((relu(x @ w1) @ w2) ** 2)`` with ``w1``, ``w2`` of shape (d, d) and ``x``
of shape (N, d). The solution wraps all of it in ``jax.checkpoint`` with
``policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable``: the two matrix products are
kept for the backward pass, the ReLU and the square are recomputed from them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from examples.problems._spec import Case, Problem, away_from_kinks, normal
from examples.tools.measure import CompiledStats, compiled_stats
from examples.tools.models import rms_norm, scan_loss
from examples.tools.residuals import saved_residuals

# -- the reference solution -----------------------------------------------------------------------


def checkpoint_dot_policy(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    """``sum((relu(x @ w1) @ w2) ** 2)``, all under one checkpoint that keeps matrix products."""

    def pipeline(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
        hidden = jax.nn.relu(x @ w1)
        return jnp.sum((hidden @ w2) ** 2)

    keep_products = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=keep_products)(w1, w2, x)


# -- the float64 reference, in NumPy --------------------------------------------------------------


def reference_f64(
    w1: ArrayLike, w2: ArrayLike, x: ArrayLike
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The value and its gradients with respect to (w1, w2, x), derived by hand, in float64.

    With ``h = x w1``, ``a = relu(h)``, ``y = a w2`` and ``L = sum(y**2)``:
    ``dL/dy = 2y``, ``dL/dw2 = a^T (2y)``, ``dL/da = 2y w2^T``, ``dL/dh = dL/da * [h > 0]``,
    ``dL/dw1 = x^T dL/dh`` and ``dL/dx = dL/dh w1^T``.
    """
    w1, w2, x = (np.asarray(v, dtype=np.float64) for v in (w1, w2, x))
    h = x @ w1
    a = np.maximum(h, 0.0)
    y = a @ w2
    dy = 2.0 * y
    dh = (dy @ w2.T) * (h > 0)
    return np.asarray(np.sum(y**2)), (x.T @ dh, a.T @ dy, dh @ w1.T)


# -- inputs ----------------------------------------------------------------------------------------

#: (N, d) of the checked inputs: a single row, a square, a tall and a wide batch.
SHAPES = ((1, 3), (4, 4), (16, 8), (5, 32))


def make_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, d in SHAPES:
        while True:
            w1 = normal(rng, (d, d), d**-0.5)
            w2 = normal(rng, (d, d), d**-0.5)
            x = normal(rng, (n, d))
            if away_from_kinks([np.asarray(x, np.float64) @ np.asarray(w1, np.float64)]):
                break
        value, grads = reference_f64(w1, w2, x)
        cases.append(
            Case(
                args=(w1, w2, x),
                label=f"N={n}, d={d}",
                expected=np.asarray(value),
                expected_grads=grads,
                cotangent=np.asarray(1.0),
            )
        )
    return cases


PROBLEM = Problem(
    name="checkpoint_dot_policy",
    position=1,
    title="Checkpoint with a policy that keeps the products",
    topic="jax.checkpoint policies",
    difficulty="medium",
    arg_names=("w1", "w2", "x"),
    returns="a float32 scalar, sum((relu(x @ w1) @ w2) ** 2)",
    reference=checkpoint_dot_policy,
    make_cases=make_cases,
    array_args=(0, 1, 2),
    output_shape=lambda case: (),
    required_policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    whole_in_checkpoint=True,
)


# -- for the page: variants a value-only grader cannot tell apart ---------------------------------


def _pipeline(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)


def without_checkpoint(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    """The right value, no checkpoint: every intermediate the backward pass needs is kept."""
    return _pipeline(w1, w2, x)


def without_policy(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    """The right value under a plain ``jax.checkpoint``: nothing kept, everything recomputed."""
    return jax.checkpoint(_pipeline)(w1, w2, x)


VARIANTS = {
    "no checkpoint": without_checkpoint,
    "jax.checkpoint, no policy": without_policy,
    "jax.checkpoint, dots_with_no_batch_dims_saveable": checkpoint_dot_policy,
}


def page_inputs(n: int = 64, d: int = 32, seed: int = 0) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Fixed inputs for the page's cells."""
    rng = np.random.default_rng(seed)
    return normal(rng, (d, d), d**-0.5), normal(rng, (d, d), d**-0.5), normal(rng, (n, d))


# -- for the page: the worked example, a two-stage tanh network (not the problem's pipeline) -------


def two_tanh_layers(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    """``mean(tanh(tanh(x @ w1) @ w2))``: two products, each followed by a cheap ``tanh``."""
    return jnp.mean(jnp.tanh(jnp.tanh(x @ w1) @ w2))


def tanh_derivative_keeps(x: jax.Array) -> list[str]:
    """The primitives whose outputs JAX's derivative rule for ``tanh`` keeps, on this JAX."""
    return [r.primitive or r.kind for r in saved_residuals(jnp.tanh, x).excluding_arguments()]


def batched_products(w: jax.Array, xs: jax.Array) -> jax.Array:
    """A product with a batch dimension (``b``) and one without: tells the dots policies apart."""
    per_example = jnp.einsum("bnd,bde->bne", xs, jnp.broadcast_to(w, (xs.shape[0], *w.shape)))
    shared = xs.reshape(-1, w.shape[0]) @ w
    return jnp.sum(jnp.sin(per_example)) + jnp.sum(jnp.sin(shared))


# -- for the page: when keeping the products pays ------------------------------------------------


def relu_layer(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    """``relu(h @ w + b)``: after the product, one cheap function that needs one saved array."""
    return jax.nn.relu(h @ p["w"] + p["b"])


def mlp_block(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    """A pre-norm MLP block, ``h + gelu(rms_norm(h) @ w1) @ w2`` with a 4x wider hidden layer:
    around its products sit a normalization and a GELU, whose derivatives need several values."""
    return h + jax.nn.gelu(rms_norm(h) @ p["w1"]) @ p["w2"]


def stacked_params(
    layer: str, depth: int = 16, batch: int = 256, width: int = 256, seed: int = 0
) -> tuple[dict[str, jax.Array], jax.Array]:
    """Weights for ``depth`` copies of ``"relu_layer"`` or ``"mlp_block"``, stacked for
    :func:`examples.tools.models.scan_loss`, and an input of shape (batch, width)."""
    keys = jax.random.split(jax.random.key(seed), 3)
    if layer == "relu_layer":
        params = {
            "w": jax.random.normal(keys[0], (depth, width, width)) * (2.0 / width) ** 0.5,
            "b": jnp.full((depth, width), 0.01),
        }
    elif layer == "mlp_block":
        hidden = 4 * width
        params = {
            "w1": jax.random.normal(keys[0], (depth, width, hidden)) / width**0.5,
            "w2": jax.random.normal(keys[1], (depth, hidden, width)) / hidden**0.5 / depth**0.5,
        }
    else:
        raise ValueError(f"unknown layer {layer!r}: relu_layer or mlp_block")
    return params, jax.random.normal(keys[2], (batch, width))


def gradient_costs(
    variants: dict[str, Any], params: dict[str, jax.Array], x: jax.Array
) -> dict[str, CompiledStats]:
    """XLA's figures for ``jax.grad`` of a scan over each variant of the layer."""
    return {
        name: compiled_stats(jax.grad(scan_loss(layer)), params, x)
        for name, layer in variants.items()
    }
