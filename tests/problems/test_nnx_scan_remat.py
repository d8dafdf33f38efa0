"""examples.problems.nnx_scan_remat: its reference against NumPy float64 (its hand gradient is
checked in test_scan_remat_body.py), and every claim its page makes."""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from problems._helpers import DOTS, NOTHING, _close

from examples.problems import nnx_scan_remat as p5
from examples.tools.compat import set_variable_value
from examples.tools.jaxprs import remat3, remat3_available, walk
from examples.tools.residuals import saved_residuals

# --- the reference against NumPy ------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_nnx_reference_matches_numpy_value_and_gradient(seed):
    for case in p5.make_cases(np.random.default_rng(seed)):
        seed_, x, features, layers = case.args
        _close(p5.nnx_scan_remat(*case.args), case.expected)
        ct = jnp.asarray(case.cotangent, jnp.float32)

        def weighted(x, args=(seed_, features, layers), ct=ct):
            return jnp.sum(p5.nnx_scan_remat(args[0], x, *args[1:]) * ct)

        grad = jax.grad(weighted)(x)
        _close(grad, case.expected_grads[0])


def test_nnx_numpy_forward_is_the_modules_and_uses_stacked_parameters():
    params = p5.reference_params(3, 4, 3)
    assert params["k1"].shape == (3, 4, 16)
    assert params["k2"].shape == (3, 16, 4)
    assert not np.allclose(params["k1"][0], params["k1"][1])  # each block its own parameters
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    h = jnp.asarray(x)
    block = p5.Block(4, rngs=nnx.Rngs(0))
    for i in range(3):  # one block at a time, its parameters set from the stacked ones
        set_variable_value(block.linear1.kernel, jnp.asarray(params["k1"][i], jnp.float32))
        set_variable_value(block.linear1.bias, jnp.asarray(params["b1"][i], jnp.float32))
        set_variable_value(block.linear2.kernel, jnp.asarray(params["k2"][i], jnp.float32))
        set_variable_value(block.linear2.bias, jnp.asarray(params["b2"][i], jnp.float32))
        h = block(h)
    _close(h, p5.reference_f64(params, x, np.ones((2, 4)))[0])


# --- the page -------------------------------------------------------------------------------------


_over_blocks = functools.partial(nnx.scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)


def _nnx_step(x, block):
    return block(x)


def test_nnx_blocks_are_stacked_by_vmap():
    blocks = p5.make_gated_blocks(seed=0, features=8, layers=4)
    assert blocks.gate.kernel.shape == (4, 8, 16)
    assert blocks.up.kernel.shape == (4, 8, 16)
    assert blocks.down.kernel.shape == (4, 16, 8)
    assert not np.allclose(blocks.gate.kernel[0], blocks.gate.kernel[1])


def test_the_worked_examples_block_is_not_the_problems():
    """The page's example must not hold the folded solution: another module, other layers."""
    example = p5.GatedBlock(4, rngs=nnx.Rngs(0))
    problem = p5.Block(4, rngs=nnx.Rngs(0))
    assert type(example) is not type(problem)
    x = p5.page_input(batch=2, features=4)
    assert not np.allclose(example(x), problem(x))


def test_gated_block_matches_numpy():
    block = p5.GatedBlock(4, rngs=nnx.Rngs(1))
    x = p5.page_input(batch=3, features=4)
    w = {
        name: (
            np.asarray(getattr(block, name).kernel[...], np.float64),
            np.asarray(getattr(block, name).bias[...], np.float64),
        )
        for name in ("gate", "up", "down")
    }
    h = np.asarray(x, np.float64)
    z = h @ w["gate"][0] + w["gate"][1]
    gelu = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    expected = h + (gelu * (h @ w["up"][0] + w["up"][1])) @ w["down"][0] + w["down"][1]
    _close(block(x), expected)


def test_nnx_listing_keeps_gelu_values_without_remat_and_products_and_carry_with():
    graphdef, state = nnx.split(p5.make_gated_blocks(seed=0, features=4, layers=3))
    x = p5.page_input(batch=2, features=4)

    def stacked(apply):
        listing = saved_residuals(p5.loss_of(graphdef, apply), state, x)
        return sorted(r.type_str for r in listing if r.primitive == "scan")

    plain = stacked(_over_blocks(_nnx_step))
    assert plain.count("f32[3,2,8]") > 2
    with_policy = stacked(_over_blocks(nnx.remat(_nnx_step, policy=DOTS)))
    assert with_policy == ["f32[3,2,4]", "f32[3,2,8]", "f32[3,2,8]"]

    # Under remat the GELU's input and the up branch (product + bias) are recomputed, so the
    # biases of gate and up are read on the backward pass; without remat none is (the page).
    def arguments(apply):
        listing = saved_residuals(p5.loss_of(graphdef, apply), state, x)
        return {r.detail for r in listing if r.kind == "argument"}

    bias = [a for a in arguments(_over_blocks(nnx.remat(_nnx_step, policy=DOTS))) if "bias" in a]
    assert len(bias) == 2
    assert {"gate", "up"} == {name for name in ("gate", "up", "down") for a in bias if name in a}
    assert not any("bias" in a for a in arguments(_over_blocks(_nnx_step)))


def test_nnx_remat_on_the_step_pays_and_around_the_scan_does_not():
    graphdef, state = nnx.split(p5.make_gated_blocks(seed=0, features=32, layers=4))
    x = p5.page_input(batch=64, features=32)
    costs = p5.gradient_costs(
        graphdef,
        state,
        x,
        {
            "none": _over_blocks(_nnx_step),
            "step dots": _over_blocks(nnx.remat(_nnx_step, policy=DOTS)),
            "step nothing": _over_blocks(nnx.remat(_nnx_step, policy=NOTHING)),
            "around dots": nnx.remat(_over_blocks(_nnx_step), policy=DOTS),
            "around nothing": nnx.remat(_over_blocks(_nnx_step), policy=NOTHING),
        },
    )
    none = costs["none"]
    assert costs["step dots"].temp_bytes < 0.6 * none.temp_bytes  # much of the memory back
    assert costs["step dots"].flops < 1.05 * none.flops  # next to no recomputation
    assert costs["step nothing"].temp_bytes < costs["step dots"].temp_bytes  # further...
    assert costs["step nothing"].flops > 1.05 * costs["step dots"].flops  # ...at a price
    for around in ("around dots", "around nothing"):
        assert costs[around].temp_bytes >= 0.95 * none.temp_bytes  # neither helps
        assert costs[around].flops >= none.flops
    assert costs["around dots"].temp_bytes > none.temp_bytes  # the page: worse than no remat


def test_nnx_policy_around_the_scan_keeps_every_layers_first_products():
    """The page: with the policy around the scan, the forward pass keeps every layer's input and
    two first products, stacked over the layers (layers x N x F and twice layers x N x 2F: the
    policy applies inside the scan), and no other computed value; with nothing saveable, none."""
    graphdef, state = nnx.split(p5.make_gated_blocks(seed=0, features=4, layers=3))
    x = p5.page_input(batch=2, features=4)
    around = nnx.remat(_over_blocks(_nnx_step), policy=DOTS)
    kept = saved_residuals(p5.loss_of(graphdef, around), state, x).excluding_arguments()
    computed = sorted(r.type_str for r in kept if r.shape != x.shape)  # the loss keeps x's shape
    assert computed == ["f32[3,2,4]", "f32[3,2,8]", "f32[3,2,8]"]
    nothing = nnx.remat(_over_blocks(_nnx_step), policy=NOTHING)
    kept = saved_residuals(p5.loss_of(graphdef, nothing), state, x).excluding_arguments()
    assert [r for r in kept if r.shape != x.shape] == []


@pytest.mark.parametrize("prevent_cse", [True, False])
def test_nnx_remat_takes_prevent_cse_as_jax_checkpoint_does(prevent_cse):
    """The page: nnx.remat passes prevent_cse on; in a scan, False keeps the same values."""
    graphdef, state = nnx.split(p5.make_gated_blocks(seed=0, features=4, layers=3))
    x = p5.page_input(batch=2, features=4)
    step = nnx.remat(_nnx_step, policy=DOTS, prevent_cse=prevent_cse)
    # the flag is a parameter of remat2's equation (the default where there is no jax_remat3)
    with remat3(False) if remat3_available() else contextlib.nullcontext():
        jaxpr = jax.make_jaxpr(p5.loss_of(graphdef, _over_blocks(step)))(state, x)
    params = [e.params for e, _ in walk(jaxpr.jaxpr) if e.primitive.name == "remat2"]
    assert [p["prevent_cse"] for p in params] == [prevent_cse]
    kept = saved_residuals(p5.loss_of(graphdef, _over_blocks(step)), state, x)
    default = saved_residuals(
        p5.loss_of(graphdef, _over_blocks(nnx.remat(_nnx_step, policy=DOTS))), state, x
    )
    assert sorted(r.type_str for r in kept) == sorted(r.type_str for r in default)


def test_blocks_from_split_rngs_have_the_shapes_but_not_the_parameters():
    @nnx.split_rngs(splits=4)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def blocks_from_rngs(rngs):
        return p5.GatedBlock(8, rngs=rngs)

    other = blocks_from_rngs(nnx.Rngs(0))
    ours = p5.make_gated_blocks(seed=0, features=8, layers=4)
    assert other.gate.kernel.shape == ours.gate.kernel.shape
    assert np.max(np.abs(other.gate.kernel[...] - ours.gate.kernel[...])) > 0.01
