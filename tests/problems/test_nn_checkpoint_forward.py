"""examples.problems.nn_checkpoint_forward: its reference against NumPy float64 (in one test
with nnx_remat_policy's), and every claim its page makes."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import errors as flax_errors
from problems._helpers import _close

from examples.problems import nn_checkpoint_forward as p2
from examples.problems import nnx_remat_policy as p3

# --- the reference against NumPy ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "fn"), [(p2, p2.nn_checkpoint_forward), (p3, p3.nnx_remat_policy)]
)
def test_flax_references_match_numpy(module, fn):
    for case in module.make_cases(np.random.default_rng(5)):
        seed, x, features = case.args
        out = fn(seed, x, features)
        assert out.shape == (int(features),)
        assert out.dtype == jnp.float32
        _close(out, case.expected)
        ct = jnp.asarray(case.cotangent, jnp.float32)
        grad = jax.grad(lambda x, seed=seed, f=features, ct=ct: jnp.sum(fn(seed, x, f) * ct))(x)
        _close(grad, case.expected_grads[0])


def test_linen_checkpoint_does_not_change_initial_parameters():
    x = jnp.ones(5)
    plain = p2.MLP(features=3).init(jax.random.PRNGKey(7), x)
    lifted = nn.checkpoint(p2.MLP)(features=3).init(jax.random.PRNGKey(7), x)
    jax.tree.map(np.testing.assert_array_equal, plain, lifted)


# --- the page -------------------------------------------------------------------------------------


def _linen_costs(*extra):
    x = p2.page_input(batch=64, features=32)
    models = {
        "none": p2.Stack(features=32, blocks=4),
        "whole": nn.checkpoint(p2.Stack)(features=32, blocks=4),
        "block": p2.Stack(features=32, blocks=4, block=nn.checkpoint(p2.Block)),
    }
    for name in extra:
        models[name] = p2.Stack(features=32, blocks=4, block=nn.checkpoint(nn.checkpoint(p2.Block)))
    return p2.gradient_costs(models, x)


@pytest.mark.cpu_figures
def test_linen_one_block_saves_memory_and_the_whole_model_only_adds_work():
    costs = _linen_costs("twice")
    none, whole, block = costs["none"], costs["whole"], costs["block"]
    assert whole.temp_bytes >= none.temp_bytes  # saves nothing
    assert whole.flops > none.flops  # adds work
    assert block.temp_bytes < none.temp_bytes
    assert block.flops > none.flops
    assert block.temp_bytes < whole.temp_bytes
    # Lifting twice compiles to the same figures as lifting once (the page says "the same").
    assert (costs["twice"].temp_bytes, costs["twice"].flops) == (block.temp_bytes, block.flops)


def test_the_worked_examples_block_is_not_the_problems():
    """The page's example must not hold the folded solution: another module, other layers."""
    x = jnp.ones(4)
    example = p2.ResidualMLP(features=4).init(jax.random.key(0), x)["params"]
    problem = p2.MLP(features=4).init(jax.random.key(0), x)["params"]
    assert p2.ResidualMLP is not p2.MLP
    assert "LayerNorm_0" in example
    assert "LayerNorm_0" not in problem


def test_residual_mlp_matches_numpy():
    x = p2.page_input(batch=3, features=4)
    variables = p2.ResidualMLP(features=4).init(jax.random.key(1), x)
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), variables["params"])
    h = np.asarray(x, np.float64)
    centred = h - h.mean(-1, keepdims=True)
    normed = centred / np.sqrt(centred.var(-1, keepdims=True) + 1e-6)
    normed = normed * p["LayerNorm_0"]["scale"] + p["LayerNorm_0"]["bias"]
    hidden = np.maximum(normed @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"], 0)
    expected = h + hidden @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"]
    _close(p2.ResidualMLP(features=4).apply(variables, x), expected)


def test_a_checkpointed_block_recomputes_only_its_first_product():
    """The page: no checkpoint 6 products (per Dense one forward, two backward), around the model
    8 (both forward products again), per block 7 (the first only: the second Dense's backward pass
    never reads its output); the FLOPs follow the same ratios."""
    x = p2.page_input(batch=64, features=32)
    models = {
        "none": p2.Stack(features=32, blocks=4),
        "whole": nn.checkpoint(p2.Stack)(features=32, blocks=4),
        "block": p2.Stack(features=32, blocks=4, block=nn.checkpoint(p2.Block)),
    }
    products = p2.gradient_products(models, x)
    assert products == {"none": 6, "whole": 8, "block": 7}
    costs = p2.gradient_costs(models, x)
    for name in ("whole", "block"):
        ratio = costs[name].flops / costs["none"].flops
        assert ratio == pytest.approx(products[name] / products["none"], abs=0.03), name


def test_linen_stack_computes_blocks_one_after_another_with_their_own_parameters():
    x = p2.page_input(batch=3, features=4)
    stack = p2.Stack(features=4, blocks=3)
    variables = stack.init(jax.random.key(0), x)
    kernels = variables["params"]["ScanBlock_0"]["ResidualMLP_0"]["Dense_0"]["kernel"]
    assert kernels.shape == (3, 4, 4)
    h = x
    for i in range(3):
        layer = jax.tree.map(lambda a, i=i: a[i], variables["params"]["ScanBlock_0"])
        h = p2.ResidualMLP(features=4).apply({"params": layer["ResidualMLP_0"]}, h)
    _close(stack.apply(variables, x), np.asarray(h, np.float64))
    # The lifted model (its scanned block has another name) with the same parameters: the same
    # gradient.
    lifted = p2.Stack(features=4, blocks=3, block=nn.checkpoint(p2.Block))
    (name,) = lifted.init(jax.random.key(0), x)["params"]
    same = {"params": {name: variables["params"]["ScanBlock_0"]}}
    plain_grad = jax.grad(p2.mean_square_loss(stack))(variables, x)["params"]["ScanBlock_0"]
    lifted_grad = jax.grad(p2.mean_square_loss(lifted))(same, x)["params"][name]
    for a, b in zip(jax.tree.leaves(plain_grad), jax.tree.leaves(lifted_grad), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_lifting_an_instance_raises_flax_transform_target_error():
    with pytest.raises(
        flax_errors.TransformTargetError,
        match="Linen transformations must be applied to Modules classes",
    ):
        nn.checkpoint(p2.MLP(features=4))
