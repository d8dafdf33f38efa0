"""Problem ``nnx_scan_remat``: a stack of NNX blocks, made with ``nnx.vmap``, applied with
``nnx.scan`` over an ``nnx.remat`` step with a policy.

Each ``Block`` is a transformer-style MLP with a residual connection,
``x + linear2(gelu(linear1(x)))``, ``linear1`` of shape (F, 4F) and ``linear2`` of shape (4F, F).
``layers`` blocks are made at once by ``nnx.vmap`` over ``jax.random.split(jax.random.key(seed),
layers)``, so that their parameters are stacked on a leading axis, and applied to ``x`` in turn
by ``nnx.scan`` over a step wrapped in
``nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)``: each block is
checkpointed on its own, keeping its matrix products and recomputing the GELU.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from numpy.typing import ArrayLike

from examples.problems._spec import Case, Problem, normal
from examples.tools import compat
from examples.tools.measure import CompiledStats, compiled_stats

# -- the reference solution -----------------------------------------------------------------------


class Block(nnx.Module):
    """``x + linear2(gelu(linear1(x)))``, with a hidden layer four times as wide as ``x``."""

    def __init__(self, features: int, *, rngs: nnx.Rngs) -> None:
        self.linear1 = nnx.Linear(features, 4 * features, rngs=rngs)
        self.linear2 = nnx.Linear(4 * features, features, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.linear2(jax.nn.gelu(self.linear1(x)))


def make_blocks(seed: int, features: int, layers: int) -> Block:
    """``layers`` blocks with their parameters stacked on a leading axis, made by ``nnx.vmap``."""

    @nnx.vmap(in_axes=0, out_axes=0)
    def create(key: jax.Array) -> Block:
        return Block(features, rngs=nnx.Rngs(key))

    return create(jax.random.split(jax.random.key(seed), layers))


def nnx_scan_remat(seed: int, x: jax.Array, features: int, layers: int) -> jax.Array:
    """Apply the stacked blocks to ``x`` with ``nnx.scan``, each under ``nnx.remat``, a policy."""
    blocks = make_blocks(seed, features, layers)

    @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
    @nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def step(x: jax.Array, block: Block) -> jax.Array:
        return block(x)

    return step(x, blocks)


# -- the float64 reference, from the initialized parameters ---------------------------------------


def reference_params(seed: int, features: int, layers: int) -> dict[str, np.ndarray]:
    """The stacked kernels and biases of :func:`make_blocks`, in float64 (leading axis: layer)."""
    state = nnx.state(make_blocks(seed, features, layers))
    return {
        f"{part}{i}": np.asarray(compat.variable_value(state[f"linear{i}"][name]), np.float64)
        for i in (1, 2)
        for part, name in (("k", "kernel"), ("b", "bias"))
    }


#: The constants of the tanh form of GELU that ``jax.nn.gelu`` computes by default.
_C = np.sqrt(2.0 / np.pi)
_A = 0.044715


def reference_f64(
    p: dict[str, np.ndarray], x: ArrayLike, cotangent: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(output, gradient of ``sum(cotangent * output)`` with respect to x), by hand, in float64.

    Per block, with ``z = x k1 + b1``, ``t = tanh(c (z + a z^3))``, ``g = z (1 + t) / 2`` and
    ``y = x + g k2 + b2``: ``dy/dx`` applied to a cotangent ``u`` is
    ``u + ((u k2^T) * g'(z)) k1^T``, with ``g'(z) = (1 + t) / 2 + z (1 - t^2) c (1 + 3 a z^2) / 2``.
    """
    h = np.asarray(x, np.float64)
    pre = []
    for k1, b1, k2, b2 in zip(p["k1"], p["b1"], p["k2"], p["b2"], strict=True):
        z = h @ k1 + b1
        t = np.tanh(_C * (z + _A * z**3))
        pre.append((z, t))
        h = h + (0.5 * z * (1.0 + t)) @ k2 + b2
    u = np.asarray(cotangent, np.float64)
    for (z, t), k1, k2 in reversed(list(zip(pre, p["k1"], p["k2"], strict=True))):
        slope = 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t**2) * _C * (1.0 + 3.0 * _A * z**2)
        u = u + ((u @ k2.T) * slope) @ k1.T
    return h, u


# -- inputs ----------------------------------------------------------------------------------------

#: (F, N, layers) of the checked inputs. The first is the one whose kept values the residuals
#: check compares, so it has several layers.
SIZES = ((4, 3, 3), (2, 1, 1), (8, 5, 6), (16, 2, 2))


def make_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for features, n, layers in SIZES:
        seed = int(rng.integers(0, 2**31 - 1))
        params = reference_params(seed, features, layers)
        x = normal(rng, (n, features))
        cotangent = rng.standard_normal((n, features))
        value, grad_x = reference_f64(params, x, cotangent)
        cases.append(
            Case(
                args=(seed, x, features, layers),
                label=f"seed={seed}, N={n}, F={features}, layers={layers}",
                expected=value,
                expected_grads=(grad_x,),
                cotangent=cotangent,
            )
        )
    return cases


PROBLEM = Problem(
    name="nnx_scan_remat",
    position=5,
    title="Scan NNX blocks with nnx.remat and a policy",
    topic="Flax NNX nnx.scan and nnx.remat",
    difficulty="hard",
    arg_names=("seed", "x", "features", "layers"),
    returns="a float32 array of shape (N, F): x after the last block",
    reference=nnx_scan_remat,
    make_cases=make_cases,
    array_args=(1,),
    output_shape=lambda case: tuple(np.shape(case.args[1])),
    required_policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    products_inside=2,
    inside_scan=True,
    scan_call="nnx.scan",
    value_hint=(
        "your blocks make their own parameters, so check how: nnx.vmap over "
        "jax.random.split(jax.random.key(seed), layers), one Block(features, "
        "rngs=nnx.Rngs(key)) per key, linear1 created before linear2 (nnx.split_rngs over one "
        "Rngs gives blocks of the same shapes but other values)"
    ),
)


# -- for the page: the worked example's block, another than the problem's -------------------------


class GatedBlock(nnx.Module):
    """A gated MLP with a residual connection, ``x + down(gelu(gate(x)) * up(x))``, its hidden
    layer twice as wide as ``x`` (the shape of the MLP in Gemma's and Llama's blocks)."""

    def __init__(self, features: int, *, rngs: nnx.Rngs) -> None:
        self.gate = nnx.Linear(features, 2 * features, rngs=rngs)
        self.up = nnx.Linear(features, 2 * features, rngs=rngs)
        self.down = nnx.Linear(2 * features, features, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return x + self.down(jax.nn.gelu(self.gate(x)) * self.up(x))


def make_gated_blocks(seed: int, features: int, layers: int) -> GatedBlock:
    """``layers`` gated blocks, their parameters stacked on a leading axis by ``nnx.vmap``."""

    @nnx.vmap(in_axes=0, out_axes=0)
    def create(key: jax.Array) -> GatedBlock:
        return GatedBlock(features, rngs=nnx.Rngs(key))

    return create(jax.random.split(jax.random.key(seed), layers))


# -- for the page ----------------------------------------------------------------------------------


def loss_of(graphdef: Any, apply: Any) -> Any:
    """``loss(state, x)``: rebuild the blocks from their state, the mean square of
    ``apply(x, blocks)`` (an ``nnx.scan``-ed step; the parameters are an argument, so a gradient
    and a residual listing take them as inputs)."""

    def loss(state: Any, x: jax.Array) -> jax.Array:
        return jnp.mean(apply(x, nnx.merge(graphdef, state)) ** 2)

    return loss


def gradient_costs(
    graphdef: Any, state: Any, x: jax.Array, variants: dict[str, Any]
) -> dict[str, CompiledStats]:
    """XLA's figures for the gradient of each variant's loss with respect to the parameters."""
    return {
        name: compiled_stats(jax.grad(loss_of(graphdef, fn)), state, x)
        for name, fn in variants.items()
    }


def page_input(batch: int = 256, features: int = 128, seed: int = 0) -> jax.Array:
    return normal(np.random.default_rng(seed), (batch, features))
