"""examples.problems.nnx_remat_policy: its NumPy float64 forward, and every claim its page makes
(its reference against NumPy is tested with nn_checkpoint_forward's, in
test_nn_checkpoint_forward.py)."""

from __future__ import annotations

import numpy as np
import pytest
from flax import nnx
from problems._helpers import DOTS, NOTHING, _close, _computed

from examples.problems import nnx_remat_policy as p3
from examples.tools import compat
from examples.tools.residuals import saved_residuals

# --- the reference against NumPy ------------------------------------------------------------------


def test_nnx_numpy_forward_is_independent_of_the_module():
    params = p3.reference_params(3.0, 4.0)
    x = np.linspace(-1, 1, 4)
    y, _, _ = p3.reference_f64(params, x, np.ones(4))
    manual = np.maximum(
        np.maximum(x @ params["k1"] + params["b1"], 0) @ params["k2"] + params["b2"], 0
    )
    np.testing.assert_array_equal(y, manual)
    assert params["k1"].shape == (4, 4)


# --- the page -------------------------------------------------------------------------------------


def test_the_worked_examples_block_is_not_the_problems():
    """The page's example must not hold the folded solution: another module, other layers."""
    example = p3.ResidualBlock(4, rngs=nnx.Rngs(0))
    problem = p3.MLP(4, rngs=nnx.Rngs(0))
    assert type(example) is not type(problem)
    assert hasattr(example, "norm")
    assert not hasattr(problem, "norm")


def _residual_block_f64(h, p):
    """``x + linear2(relu(linear1(layer_norm(x))))`` in float64; ``p`` maps "norm.scale", ...
    to arrays."""
    centred = h - h.mean(-1, keepdims=True)
    normed = centred / np.sqrt(centred.var(-1, keepdims=True) + 1e-6)
    normed = normed * p["norm.scale"] + p["norm.bias"]
    hidden = np.maximum(normed @ p["linear1.kernel"] + p["linear1.bias"], 0)
    return h + hidden @ p["linear2.kernel"] + p["linear2.bias"]


_PARTS = [(layer, name) for layer in ("linear1", "linear2") for name in ("kernel", "bias")]
_PARTS += [("norm", "scale"), ("norm", "bias")]


def test_residual_block_matches_numpy():
    block = p3.ResidualBlock(4, rngs=nnx.Rngs(1))
    x = p3.page_input(batch=3, features=4)
    params = {
        f"{layer}.{name}": np.asarray(
            compat.variable_value(getattr(getattr(block, layer), name)), np.float64
        )
        for layer, name in _PARTS
    }
    _close(block(x), _residual_block_f64(np.asarray(x, np.float64), params))


def test_nnx_one_block_listing_keeps_norm_and_mask_without_remat_and_a_product_with_the_policy():
    graphdef, state = nnx.split(p3.ResidualBlock(8, rngs=nnx.Rngs(0)))
    x = p3.page_input(batch=1, features=8)[0]
    plain = _computed(p3.loss_of(graphdef, p3.forward), state, x)
    assert ("gt", "bool[8]") in plain
    assert ("broadcast_in_dim", "f32[8]") in plain  # the zeros ReLU's derivative selects from
    assert ("sub", "f32[8]") in plain  # the centred input
    assert ("rsqrt", "f32[1]") in plain  # its inverse standard deviation
    kept = _computed(p3.loss_of(graphdef, nnx.remat(p3.forward, policy=DOTS)), state, x)
    # The first product only (the second feeds the residual sum), and the loss's own 2y.
    assert kept == [("dot_general", "f32[8]"), ("mul", "f32[8]")]
    assert ("mul", "f32[8]") in plain
    listing = saved_residuals(p3.loss_of(graphdef, nnx.remat(p3.forward, policy=DOTS)), state, x)
    assert "x" in [r.detail for r in listing if r.kind == "argument"]  # the block's input


def test_nnx_remat_per_block_beats_the_whole_model_for_each_policy():
    graphdef, state = nnx.split(p3.make_blocks(blocks=4, features=32))
    x = p3.page_input(batch=64, features=32)

    def model(blocks, x):
        return p3.apply_blocks(p3.forward, blocks, x)

    def each_block(policy):
        step = nnx.remat(p3.forward, policy=policy)
        return lambda blocks, x: p3.apply_blocks(step, blocks, x)

    costs = p3.gradient_costs(
        graphdef,
        state,
        x,
        {
            "none": model,
            "whole dots": nnx.remat(model, policy=DOTS),
            "whole nothing": nnx.remat(model, policy=NOTHING),
            "block dots": each_block(DOTS),
            "block nothing": each_block(NOTHING),
        },
    )
    none = costs["none"]
    for whole in ("whole dots", "whole nothing"):
        assert costs[whole].temp_bytes >= none.temp_bytes  # never helps
    assert costs["whole dots"].temp_bytes > none.temp_bytes  # the page: worse than no remat
    assert costs["whole nothing"].flops > none.flops
    assert costs["block dots"].temp_bytes < costs["whole dots"].temp_bytes
    assert costs["block nothing"].temp_bytes < costs["whole nothing"].temp_bytes
    assert costs["block nothing"].temp_bytes < none.temp_bytes
    assert costs["block nothing"].flops > none.flops
    assert costs["block dots"].temp_bytes < none.temp_bytes  # the norm's values: the policy pays
    assert costs["block dots"].flops < 1.05 * none.flops


def test_nnx_a_policy_around_the_scan_keeps_every_blocks_products_and_the_masks_again():
    """The page: with the policy around the model, the forward pass keeps two arrays of every
    block (its input and first product), stacked over the blocks (the policy applies inside the
    scan), and nothing else stacked; with nothing saveable, none. The backward pass then
    recomputes the scan, which keeps what no remat keeps (the norm's values and the mask)."""
    graphdef, state = nnx.split(p3.make_blocks(blocks=3, features=4))
    x = p3.page_input(batch=2, features=4)

    def model(blocks, x):
        return p3.apply_blocks(p3.forward, blocks, x)

    assert p3.stacked_values_kept(graphdef, state, x, nnx.remat(model, policy=DOTS)) == 2
    assert p3.stacked_values_kept(graphdef, state, x, nnx.remat(model, policy=NOTHING)) == 0
    assert p3.stacked_values_kept(graphdef, state, x, model) > 2
    kept = saved_residuals(p3.loss_of(graphdef, nnx.remat(model, policy=DOTS)), state, x)
    stacked = [r for r in kept.excluding_arguments() if r.shape == (3, *x.shape)]
    assert {str(r.dtype) for r in stacked} == {"float32"}  # not the masks


def _stacked(state, layer: str, name: str, i: int) -> np.ndarray:
    """Block ``i`` of a stacked parameter of an NNX state, in float64.

    Read the same way on every Flax release (:func:`examples.tools.compat.variable_value`).
    """
    return np.asarray(compat.variable_value(state[layer][name])[i], np.float64)


def test_nnx_blocks_are_applied_in_order_with_their_own_parameters():
    blocks = p3.make_blocks(blocks=3, features=4)
    x = p3.page_input(batch=2, features=4)
    state = nnx.state(blocks)
    h = np.asarray(x, np.float64)
    for i in range(3):
        params = {f"{layer}.{name}": _stacked(state, layer, name, i) for layer, name in _PARTS}
        h = _residual_block_f64(h, params)
    _close(p3.apply_blocks(p3.forward, blocks, x), h)
    step = nnx.remat(p3.forward, policy=DOTS)
    _close(p3.apply_blocks(step, blocks, x), h)


def test_nnx_policy_passed_positionally_raises_a_type_error():
    with pytest.raises(TypeError, match="as an abstract array"):

        @nnx.remat(DOTS)
        def forward_wrong(block, x):
            return block(x)
