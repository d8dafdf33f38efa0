"""Problem ``nnx_remat_policy``: ``nnx.remat`` with a policy around a Flax NNX module's forward.

An NNX ``MLP`` of two ``nnx.Linear(F, F)`` layers, each followed by ReLU, is built with
``nnx.Rngs(int(seed))``; its forward pass is wrapped in
``nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)``. ``seed`` and
``features`` arrive as floats (as a grader that passes every argument as a number would send them)
and are cast to ``int``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from numpy.typing import ArrayLike

from examples.problems._spec import Case, Problem, away_from_kinks, normal
from examples.tools.measure import CompiledStats, compiled_stats
from examples.tools.residuals import saved_residuals

# -- the reference solution -----------------------------------------------------------------------


class MLP(nnx.Module):
    """Two ``nnx.Linear(features, features)`` layers, each followed by ReLU."""

    def __init__(self, features: int, *, rngs: nnx.Rngs) -> None:
        self.linear1 = nnx.Linear(features, features, rngs=rngs)
        self.linear2 = nnx.Linear(features, features, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(self.linear1(x))
        return jax.nn.relu(self.linear2(x))


def nnx_remat_policy(seed: float, x: jax.Array, features: float) -> jax.Array:
    """Build the MLP, run its forward under ``nnx.remat`` keeping the products; flatten."""
    model = MLP(int(features), rngs=nnx.Rngs(int(seed)))

    @nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def forward(model: MLP, x: jax.Array) -> jax.Array:
        return model(x)

    return forward(model, x).reshape(-1)


# -- the float64 reference, from the initialized parameters ---------------------------------------


def reference_params(seed: float, features: float) -> dict[str, np.ndarray]:
    """The kernels and biases of ``MLP(int(features), rngs=nnx.Rngs(int(seed)))``, in float64."""
    model = MLP(int(features), rngs=nnx.Rngs(int(seed)))
    return {
        "k1": np.asarray(model.linear1.kernel[...], np.float64),
        "b1": np.asarray(model.linear1.bias[...], np.float64),
        "k2": np.asarray(model.linear2.kernel[...], np.float64),
        "b2": np.asarray(model.linear2.bias[...], np.float64),
    }


def reference_f64(
    p: dict[str, np.ndarray], x: ArrayLike, cotangent: np.ndarray
) -> tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """(output, gradient of ``sum(cotangent * output)`` w.r.t. x, the two pre-activations).

    ``nnx.Linear`` computes ``x @ kernel + bias`` with a kernel of shape (in, out).
    """
    x = np.asarray(x, np.float64)
    h1 = x @ p["k1"] + p["b1"]
    a1 = np.maximum(h1, 0.0)
    h2 = a1 @ p["k2"] + p["b2"]
    y = np.maximum(h2, 0.0)
    dh2 = cotangent * (h2 > 0)
    dh1 = (p["k2"] @ dh2) * (h1 > 0)
    return y, p["k1"] @ dh1, (h1, h2)


# -- inputs ----------------------------------------------------------------------------------------

#: The feature counts F of the checked inputs (x has shape (F,)).
FEATURES = (2, 4, 16)


def make_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for f in FEATURES:
        seed = float(rng.integers(0, 2**31 - 1))
        params = reference_params(seed, float(f))
        cotangent = rng.standard_normal(f)
        while True:
            x = normal(rng, (f,))
            value, grad_x, pre = reference_f64(params, x, cotangent)
            if away_from_kinks(pre):
                break
        cases.append(
            Case(
                args=(seed, x, float(f)),
                label=f"seed={seed:.0f}, F={f}",
                expected=value,
                expected_grads=(grad_x,),
                cotangent=cotangent,
            )
        )
    return cases


PROBLEM = Problem(
    name="nnx_remat_policy",
    position=3,
    title="nnx.remat with a policy",
    topic="Flax NNX nnx.remat",
    difficulty="medium",
    arg_names=("seed", "x", "features"),
    returns="a float32 array of shape (F,): the second ReLU's output, flattened",
    reference=nnx_remat_policy,
    make_cases=make_cases,
    array_args=(1,),
    output_shape=lambda case: (int(case.args[2]),),
    required_policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    value_hint=(
        "your model makes its own parameters, so check how: build it with "
        "nnx.Rngs(int(seed)), and create the first layer before the second (each nnx.Linear "
        "draws its values from the Rngs in turn)"
    ),
)


# -- for the page: one block of a deep model, another than the problem's -------------------------


class ResidualBlock(nnx.Module):
    """A pre-norm residual MLP block, ``x + linear2(relu(linear1(norm(x))))``: the worked example's
    module, which is not the problem's."""

    def __init__(self, features: int, *, rngs: nnx.Rngs) -> None:
        self.norm = nnx.LayerNorm(features, rngs=rngs)
        self.linear1 = nnx.Linear(features, features, rngs=rngs)
        self.linear2 = nnx.Linear(features, features, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.linear2(jax.nn.relu(self.linear1(self.norm(x))))


def make_blocks(blocks: int, features: int, seed: int = 0) -> ResidualBlock:
    """``blocks`` residual blocks, their parameters stacked on a leading axis by ``nnx.vmap``."""

    @nnx.vmap(in_axes=0, out_axes=0)
    def create(key: jax.Array) -> ResidualBlock:
        return ResidualBlock(features, rngs=nnx.Rngs(key))

    return create(jax.random.split(jax.random.key(seed), blocks))


def apply_blocks(step: Any, blocks: nnx.Module, x: jax.Array) -> jax.Array:
    """Apply ``step(block, x)`` once per stacked block, with ``nnx.scan``."""

    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    def over_blocks(x: jax.Array, block: nnx.Module) -> jax.Array:
        return step(block, x)

    return over_blocks(x, blocks)


def forward(block: nnx.Module, x: jax.Array) -> jax.Array:
    """One block's forward pass: the function ``nnx.remat`` transforms."""
    return block(x)


def loss_of(graphdef: Any, model_forward: Any) -> Any:
    """``loss(state, x)``: rebuild the blocks from their state, the mean square of
    ``model_forward(blocks, x)``.

    Taking the parameters as an argument makes them show up in a residual listing as what they
    are, inputs, rather than as values computed inside.
    """

    def loss(state: Any, x: jax.Array) -> jax.Array:
        return jnp.mean(model_forward(nnx.merge(graphdef, state), x) ** 2)

    return loss


def stacked_values_kept(graphdef: Any, state: Any, x: jax.Array, model_forward: Any) -> int:
    """How many of the values the backward pass keeps (arguments aside) are stacked over the
    blocks: computed inside the scan, one per block, and kept for every block at once."""
    blocks = jax.tree.leaves(state)[0].shape[0]
    kept = saved_residuals(loss_of(graphdef, model_forward), state, x).excluding_arguments()
    return sum(1 for r in kept if r.shape[:1] == (blocks,) and r.shape[1:] == x.shape)


def gradient_costs(
    graphdef: Any, state: Any, x: jax.Array, variants: dict[str, Any]
) -> dict[str, CompiledStats]:
    """XLA's figures for the gradient of each variant's loss with respect to the parameters."""
    return {
        name: compiled_stats(jax.grad(loss_of(graphdef, fn)), state, x)
        for name, fn in variants.items()
    }


def page_input(batch: int = 1024, features: int = 256, seed: int = 0) -> jax.Array:
    return normal(np.random.default_rng(seed), (batch, features))
