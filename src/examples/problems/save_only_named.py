"""Problem ``save_only_named``: name one value with ``checkpoint_name`` and keep only it.

The pipeline is ``sum((tanh(x @ w1) @ w2) ** 2)`` with ``w1`` of shape (d, H), ``w2`` of shape
(H, d) and ``x`` of shape (N, d). The solution names the hidden pre-activation ``x @ w1``
``"hidden"`` with ``jax.ad_checkpoint.checkpoint_name`` and checkpoints the whole pipeline with
``policy=jax.checkpoint_policies.save_only_these_names("hidden")``: the backward pass keeps that
one (N, H) array and recomputes the rest from it, the second product included.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.ad_checkpoint import checkpoint_name
from numpy.typing import ArrayLike

from examples.problems._spec import Case, Problem, normal
from examples.tools.models import rms_norm

#: The name the problem asks for.
HIDDEN = "hidden"

# -- the reference solution -----------------------------------------------------------------------


def save_only_named(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
    """``sum((tanh(x @ w1) @ w2) ** 2)`` under one checkpoint that keeps only the named value."""

    def pipeline(w1: jax.Array, w2: jax.Array, x: jax.Array) -> jax.Array:
        hidden = checkpoint_name(x @ w1, "hidden")
        return jnp.sum((jnp.tanh(hidden) @ w2) ** 2)

    keep_hidden = jax.checkpoint_policies.save_only_these_names("hidden")
    return jax.checkpoint(pipeline, policy=keep_hidden)(w1, w2, x)


# -- the float64 reference, in NumPy --------------------------------------------------------------


def reference_f64(
    w1: ArrayLike, w2: ArrayLike, x: ArrayLike
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The value and its gradients with respect to (w1, w2, x), by hand, in float64.

    With ``h = x w1``, ``a = tanh(h)``, ``y = a w2`` and ``L = sum(y**2)``: ``dL/dy = 2y``,
    ``dL/dw2 = a^T (2y)``, ``dL/dh = (2y w2^T) * (1 - a**2)``, ``dL/dw1 = x^T dL/dh`` and
    ``dL/dx = dL/dh w1^T``.
    """
    w1, w2, x = (np.asarray(v, dtype=np.float64) for v in (w1, w2, x))
    a = np.tanh(x @ w1)
    y = a @ w2
    dy = 2.0 * y
    dh = (dy @ w2.T) * (1.0 - a**2)
    return np.asarray(np.sum(y**2)), (x.T @ dh, a.T @ dy, dh @ w1.T)


# -- inputs ----------------------------------------------------------------------------------------

#: (N, d, H) of the checked inputs. The first is the one whose kept values the residuals check
#: compares; every shape has H != d, so the named (N, H) value cannot be confused with another.
SHAPES = ((4, 3, 8), (1, 2, 4), (16, 8, 32), (5, 16, 64))


def make_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, d, hidden in SHAPES:
        w1 = normal(rng, (d, hidden), d**-0.5)
        w2 = normal(rng, (hidden, d), hidden**-0.5)
        x = normal(rng, (n, d))
        value, grads = reference_f64(w1, w2, x)
        cases.append(
            Case(
                args=(w1, w2, x),
                label=f"N={n}, d={d}, H={hidden}",
                expected=value,
                expected_grads=grads,
                cotangent=np.asarray(1.0),
            )
        )
    return cases


PROBLEM = Problem(
    name="save_only_named",
    position=6,
    title="Name a value and keep only it",
    topic="checkpoint_name and save_only_these_names",
    difficulty="medium",
    arg_names=("w1", "w2", "x"),
    returns="a float32 scalar, sum((tanh(x @ w1) @ w2) ** 2)",
    reference=save_only_named,
    make_cases=make_cases,
    array_args=(0, 1, 2),
    output_shape=lambda case: (),
    required_policy=jax.checkpoint_policies.save_only_these_names(HIDDEN),
    products_inside=2,
    names=(HIDDEN,),
    whole_in_checkpoint=True,
)


# -- for the page: a block with two names ---------------------------------------------------------


def named_mlp_block(h: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    """The pre-norm MLP block of :func:`examples.problems.checkpoint_dot_policy.mlp_block`, with
    the normalized input named ``"normed"`` and the first product (the GELU's input)
    ``"mlp_pre"``."""
    normed = checkpoint_name(rms_norm(h), "normed")
    pre = checkpoint_name(normed @ p["w1"], "mlp_pre")
    return h + jax.nn.gelu(pre) @ p["w2"]
