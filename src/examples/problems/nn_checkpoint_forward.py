"""Problem ``nn_checkpoint_forward``: lift a Flax linen module class with ``nn.checkpoint``.

An ``MLP`` of ``Dense(features) -> relu -> Dense(features)`` is lifted with
``nn.checkpoint(MLP)``, initialized with ``jax.random.PRNGKey(seed)`` and a 1-D ``x``, and applied
to ``x``; the function returns the flattened output of shape ``(features,)``. ``nn.checkpoint``
passes no policy, so the backward pass keeps only the module's inputs and recomputes the rest.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from examples.problems._spec import Case, Problem, away_from_kinks, normal
from examples.tools.jaxprs import count_primitive
from examples.tools.measure import CompiledStats, compiled_stats

# -- the reference solution -----------------------------------------------------------------------


class MLP(nn.Module):
    """Dense, ReLU, Dense, all of width ``features``."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        x = nn.Dense(self.features)(x)
        x = nn.relu(x)
        return nn.Dense(self.features)(x)


def nn_checkpoint_forward(seed: int, x: jax.Array, features: int) -> jax.Array:
    """Initialize and apply ``nn.checkpoint(MLP)``; return the output flattened, ``(features,)``."""
    CheckpointedMLP = nn.checkpoint(MLP)  # lift the class, then make an instance
    model = CheckpointedMLP(features=features)
    variables = model.init(jax.random.PRNGKey(seed), x)
    return model.apply(variables, x).reshape(-1)


# -- the float64 reference, from the initialized parameters ---------------------------------------


def reference_params(seed: int, x: jax.Array, features: int) -> dict[str, np.ndarray]:
    """The kernels and biases a plain ``MLP`` gets from ``PRNGKey(seed)``, as float64 arrays.

    ``nn.checkpoint`` does not change how parameters are initialized (the tests check that), so
    these are also the checkpointed model's parameters.
    """
    params = MLP(features=features).init(jax.random.PRNGKey(seed), x)["params"]
    return {
        "k1": np.asarray(params["Dense_0"]["kernel"], np.float64),
        "b1": np.asarray(params["Dense_0"]["bias"], np.float64),
        "k2": np.asarray(params["Dense_1"]["kernel"], np.float64),
        "b2": np.asarray(params["Dense_1"]["bias"], np.float64),
    }


def reference_f64(
    p: dict[str, np.ndarray], x: ArrayLike, cotangent: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(output, gradient of ``sum(cotangent * output)`` with respect to x, pre-activation).

    A linen ``Dense`` computes ``x @ kernel + bias`` with a kernel of shape (in, out).
    """
    x = np.asarray(x, np.float64)
    h = x @ p["k1"] + p["b1"]
    y = np.maximum(h, 0.0) @ p["k2"] + p["b2"]
    dh = (p["k2"] @ cotangent) * (h > 0)
    return y, p["k1"] @ dh, h


# -- inputs ----------------------------------------------------------------------------------------

#: (D, features) of the checked inputs.
SIZES = ((3, 4), (8, 2), (5, 16))


def make_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for d, features in SIZES:
        seed = int(rng.integers(0, 2**31 - 1))
        cotangent = rng.standard_normal(features)
        while True:
            x = normal(rng, (d,))
            params = reference_params(seed, x, features)
            value, grad_x, h = reference_f64(params, x, cotangent)
            if away_from_kinks([h]):
                break
        cases.append(
            Case(
                args=(seed, x, features),
                label=f"seed={seed}, D={d}, features={features}",
                expected=value,
                expected_grads=(grad_x,),
                cotangent=cotangent,
            )
        )
    return cases


PROBLEM = Problem(
    name="nn_checkpoint_forward",
    position=2,
    title="Lift a linen module with nn.checkpoint",
    topic="Flax linen nn.checkpoint",
    difficulty="easy",
    arg_names=("seed", "x", "features"),
    returns="a float32 array of shape (features,): the MLP's output, flattened",
    reference=nn_checkpoint_forward,
    make_cases=make_cases,
    array_args=(1,),
    output_shape=lambda case: (case.args[2],),
    required_policy=None,
    value_hint=(
        "your model makes its own parameters, so check how: create the two Dense layers in the "
        "order they are applied (linen names them Dense_0 and Dense_1 in creation order, and the "
        "names pick the initial values), and initialise with jax.random.PRNGKey(seed)"
    ),
)


# -- for the page: one block of a deep model, another than the problem's --------------------------


class ResidualMLP(nn.Module):
    """A pre-norm residual block, ``x + Dense(relu(Dense(LayerNorm(x))))``: the worked example's
    module, which is not the problem's."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        h = nn.Dense(self.features)(nn.LayerNorm()(x))
        return x + nn.Dense(self.features)(nn.relu(h))


class Block(nn.Module):
    """``ResidualMLP`` as one step of a scan over layers: ``(x, _) -> (ResidualMLP(x), None)``."""

    features: int

    @nn.compact
    def __call__(self, x: jax.Array, _: Any) -> tuple[jax.Array, None]:
        return ResidualMLP(self.features)(x), None


class Stack(nn.Module):
    """``blocks`` copies of ``block`` (a class: ``Block``, or ``nn.checkpoint(Block)``) applied
    one after another with ``nn.scan``, each copy with its own parameters."""

    features: int
    blocks: int
    block: Any = Block

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        layers = nn.scan(
            self.block,
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=self.blocks,
        )
        x, _ = layers(self.features)(x, None)
        return x


def mean_square_loss(model: nn.Module) -> Any:
    """``loss(variables, x) = mean(model.apply(variables, x) ** 2)``."""

    def loss(variables: Any, x: jax.Array) -> jax.Array:
        return jnp.mean(model.apply(variables, x) ** 2)

    return loss


def gradient_costs(models: dict[str, nn.Module], x: jax.Array) -> dict[str, CompiledStats]:
    """XLA's figures for the gradient of each model's loss (each initialized from key 0)."""
    costs = {}
    for name, model in models.items():
        variables = model.init(jax.random.key(0), x)
        costs[name] = compiled_stats(jax.grad(mean_square_loss(model)), variables, x)
    return costs


def gradient_products(models: dict[str, nn.Module], x: jax.Array) -> dict[str, int]:
    """The matrix products (``dot_general``) in the traced gradient of each model's loss: the
    scan's body counted once, so one block's products, forward and backward."""
    counts = {}
    for name, model in models.items():
        variables = model.init(jax.random.key(0), x)
        traced = jax.make_jaxpr(jax.grad(mean_square_loss(model)))(variables, x)
        counts[name] = count_primitive(traced.jaxpr, "dot_general")
    return counts


def page_input(batch: int = 1024, features: int = 256, seed: int = 0) -> jax.Array:
    return normal(np.random.default_rng(seed), (batch, features))
