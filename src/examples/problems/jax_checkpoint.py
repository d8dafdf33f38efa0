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

from examples.problems._common import Case, Problem, away_from_kinks, normal

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
    w1: np.ndarray, w2: np.ndarray, x: np.ndarray
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
    return np.sum(y**2), (x.T @ dh, a.T @ dy, dh @ w1.T)


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
    title="Checkpoint with a policy that keeps the products",
    topic="jax.checkpoint policies",
    difficulty="medium",
    arg_names=("w1", "w2", "x"),
    returns="a float32 scalar, sum((relu(x @ w1) @ w2) ** 2)",
    page="problems/checkpoint_dot_policy",
    reference=checkpoint_dot_policy,
    make_cases=make_cases,
    array_args=(0, 1, 2),
    output_shape=lambda case: (),
    required_policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
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


#: The worked example under a policy: the products are kept, the tanh values recomputed.
two_tanh_layers_keep_products = jax.checkpoint(
    two_tanh_layers, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable
)


def batched_products(w: jax.Array, xs: jax.Array) -> jax.Array:
    """A product with a batch dimension (``b``) and one without: tells the dots policies apart."""
    per_example = jnp.einsum("bnd,bde->bne", xs, jnp.broadcast_to(w, (xs.shape[0], *w.shape)))
    shared = xs.reshape(-1, w.shape[0]) @ w
    return jnp.sum(jnp.sin(per_example)) + jnp.sum(jnp.sin(shared))


def under_policy(fn: Any, policy: Any) -> Any:
    """``jax.checkpoint(fn, policy=policy)``: named so a page cell reads as prose."""
    return jax.checkpoint(fn, policy=policy)
