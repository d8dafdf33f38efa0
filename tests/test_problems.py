"""The problems: discovery, the references against NumPy float64, the policy comparison under
both remat implementations, and every claim the problem pages make."""

from __future__ import annotations

import contextlib
import importlib
import re
import sys
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import errors as flax_errors
from flax import nnx
from remat_modes import REMAT_MODES

import examples.problems
from examples import compat
from examples.jaxprs import remat3, remat3_available, remat_sites
from examples.problems import (
    DiscoveryError,
    all_problems,
    load_problem,
    problem_names,
)
from examples.problems import checkpoint_dot_policy as p1
from examples.problems import nn_checkpoint_forward as p2
from examples.problems import nnx_remat_policy as p3
from examples.problems._checks import (
    compare_policy,
    remat3_ignores_function_policies,
    residual_signature,
)
from examples.residuals import saved_residuals

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "problems"
DOTS = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
NOTHING = jax.checkpoint_policies.nothing_saveable


@pytest.fixture(autouse=True)
def _full_float32_products():
    """A GPU's default TF32 products (or a TPU's bfloat16 passes) are not float32 references."""
    with jax.default_matmul_precision("highest"):
        yield


def _close(actual, expected, rtol=1e-4, atol=1e-6):
    actual = np.asarray(actual, np.float64)
    scale = np.max(np.abs(expected), initial=0.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol + rtol * scale)


# --- discovery -----------------------------------------------------------------------------------


def page_names() -> set[str]:
    return {p.stem for p in PAGES.glob("*.md")} - {"index"}


def mismatches(modules: set[str], pages: set[str]) -> list[str]:
    """What is missing on either side: a module without a page, a page without a module."""
    return [
        *(f"examples/problems/{m}.py has no page docs/problems/{m}.md" for m in modules - pages),
        *(f"docs/problems/{p}.md has no module examples/problems/{p}.py" for p in pages - modules),
    ]


def test_discovery_finds_every_problem_module_and_each_has_a_page():
    on_disk = {p.stem for p in (ROOT / "src" / "examples" / "problems").glob("*.py")} - {"__init__"}
    assert set(problem_names()) == {name for name in on_disk if not name.startswith("_")}
    assert mismatches(set(problem_names()), page_names()) == []
    problems = all_problems()
    assert [p.name for p in problems] == sorted(
        problem_names(), key=lambda n: load_problem(n).position
    )
    assert [p.position for p in problems] == sorted({p.position for p in problems})
    for problem in problems:
        assert problem.page == f"problems/{problem.name}"
        assert getattr(
            importlib.import_module(f"examples.problems.{problem.name}"), problem.name
        ) is (problem.reference)
    assert set(examples.problems.PROBLEMS) == set(problem_names())


def test_a_module_without_a_page_or_a_page_without_a_module_is_caught():
    assert mismatches({"a", "b"}, {"b", "c"}) == [
        "examples/problems/a.py has no page docs/problems/a.md",
        "docs/problems/c.md has no module examples/problems/c.py",
    ]


def test_the_problems_index_lists_them_all_through_discovery():
    index = (PAGES / "index.md").read_text()
    assert "all_problems()" in index  # the table comes from discovery
    assert re.search(r"```\{toctree\}\n:hidden:\n:glob:\n\n\*\n```", index)


@pytest.fixture
def extra_problem_dir(tmp_path, monkeypatch):
    """A folder on ``examples.problems.__path__``, for modules a test writes."""
    monkeypatch.setattr(examples.problems, "__path__", [*examples.problems.__path__, str(tmp_path)])
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("examples.problems.bogus")]:
        del sys.modules[name]


def test_a_module_that_declares_no_problem_fails_discovery(extra_problem_dir):
    (extra_problem_dir / "bogus_empty.py").write_text("X = 1\n")
    assert "bogus_empty" in problem_names()
    assert "bogus_empty" in mismatches(set(problem_names()), page_names())[0]
    with pytest.raises(DiscoveryError, match="declares no PROBLEM"):
        load_problem("bogus_empty")
    with pytest.raises(DiscoveryError):
        all_problems()


def test_a_module_named_otherwise_than_its_problem_fails_discovery(extra_problem_dir):
    source = Path(p1.__file__).read_text()
    (extra_problem_dir / "bogus_renamed.py").write_text(source)
    with pytest.raises(DiscoveryError, match="declares the problem 'checkpoint_dot_policy'"):
        load_problem("bogus_renamed")


def test_unknown_problem():
    with pytest.raises(KeyError):
        load_problem("remat_everything")


# --- the references against NumPy ----------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_dot_policy_matches_numpy_value_and_gradients(seed):
    for case in p1.make_cases(np.random.default_rng(seed)):
        w1, w2, x = case.args
        _close(p1.checkpoint_dot_policy(w1, w2, x), case.expected)
        grads = jax.grad(p1.checkpoint_dot_policy, argnums=(0, 1, 2))(w1, w2, x)
        for got, want in zip(grads, case.expected_grads, strict=True):
            _close(got, want)


def test_dot_policy_hand_gradients_match_finite_differences():
    rng = np.random.default_rng(3)
    w1, w2, x = (
        rng.standard_normal((4, 4)),
        rng.standard_normal((4, 4)),
        rng.standard_normal((3, 4)),
    )
    _, grads = p1.reference_f64(w1, w2, x)
    eps = 1e-6
    for i, arg in enumerate((w1, w2, x)):
        numeric = np.zeros_like(arg)
        for index in np.ndindex(arg.shape):
            up, down = [a.copy() for a in (w1, w2, x)], [a.copy() for a in (w1, w2, x)]
            up[i][index] += eps
            down[i][index] -= eps
            numeric[index] = (p1.reference_f64(*up)[0] - p1.reference_f64(*down)[0]) / (2 * eps)
        np.testing.assert_allclose(grads[i], numeric, rtol=1e-5, atol=1e-6)


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


def test_nnx_numpy_forward_is_independent_of_the_module():
    params = p3.reference_params(3.0, 4.0)
    x = np.linspace(-1, 1, 4)
    y, _, _ = p3.reference_f64(params, x, np.ones(4))
    manual = np.maximum(
        np.maximum(x @ params["k1"] + params["b1"], 0) @ params["k2"] + params["b2"], 0
    )
    np.testing.assert_array_equal(y, manual)
    assert params["k1"].shape == (4, 4)


def test_cases_are_fresh_and_away_from_relu_kinks():
    a = p1.make_cases(np.random.default_rng(0))
    b = p1.make_cases(np.random.default_rng(1))
    assert not np.array_equal(a[0].args[2], b[0].args[2])
    for case in a:
        w1, _, x = case.args
        assert np.min(np.abs(np.asarray(x, np.float64) @ np.asarray(w1, np.float64))) > 1e-3


# --- the checker's structure checks, under both implementations ----------------------------------


def _mode(under_remat3):
    return remat3(True) if under_remat3 else contextlib.nullcontext()


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_remat_sites_look_inside_jit_and_count_nesting(under_remat3):
    with _mode(under_remat3):
        double = jax.jit(jax.checkpoint(jax.checkpoint(p1._pipeline), policy=DOTS))
        sites = remat_sites(jax.make_jaxpr(double)(*p1.page_inputs(n=2, d=3)).jaxpr)
        assert sorted(s.depth for s in sites) == [0, 1]
        assert all(s.products == 2 for s in sites)
        assert remat_sites(jax.make_jaxpr(p1._pipeline)(*p1.page_inputs(n=2, d=3)).jaxpr) == []


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_compare_policy_by_identity_and_by_behaviour(under_remat3):
    with _mode(under_remat3):
        assert compare_policy(DOTS, DOTS)[0]
        # dots_saveable also keeps products with a batch dimension: the probe tells them apart.
        ok, detail = compare_policy(jax.checkpoint_policies.dots_saveable, DOTS)
        assert not ok
        assert "found dots_saveable" in detail
        assert not compare_policy(None, DOTS)[0]
        assert compare_policy(None, None)[0]
        assert compare_policy(NOTHING, None)[0]
        assert not compare_policy("dots_with_no_batch_dims_saveable", DOTS)[0]


def test_a_policy_function_of_ones_own_is_judged_by_what_this_jax_does_with_it():
    """A wrapper is another object: the default implementation calls it, so it keeps what the
    policy it wraps keeps. Under jax_remat3, JAX 0.10.2 (for one) does not call it and keeps
    nothing; JAX 0.12 calls it. The checker's verdict follows what this JAX does, in this run."""

    def wrapper(*args, **kwargs):
        return DOTS(*args, **kwargs)

    ok, detail = compare_policy(wrapper, DOTS)
    assert ok
    assert "another object" in detail
    if not remat3_available():
        pytest.skip("this JAX has no jax_remat3")
    args = p1.page_inputs(n=2, d=3)
    with remat3(True):
        ok, detail = compare_policy(wrapper, DOTS)
        kept = saved_residuals(jax.checkpoint(p1._pipeline, policy=wrapper), *args)
        by_dots = saved_residuals(jax.checkpoint(p1._pipeline, policy=DOTS), *args)
    if len(kept.excluding_arguments()) == 0:  # this remat3 recomputes everything instead
        assert remat3_ignores_function_policies()
        assert not ok
        assert "under jax_remat3, JAX does not call a policy written as a function" in detail
    else:  # this remat3 calls the function, as remat2 does
        assert not remat3_ignores_function_policies()
        assert residual_signature(kept) == residual_signature(by_dots)
        assert ok, detail
        assert "another object" in detail


@pytest.mark.skipif(not remat3_available(), reason="this JAX has no jax_remat3")
def test_residual_signature_is_the_same_under_both_implementations():
    """What the reference keeps, as the residuals check compares it, does not depend on the
    implementation, although the listings may name the arguments differently."""
    args = p1.page_inputs(n=2, d=3)
    listings = {}
    for on in (False, True):
        with remat3(on):
            # jax.checkpoint picks its implementation when it wraps, so wrap inside the block.
            direct = jax.checkpoint(p1._pipeline, policy=DOTS)
            listings[on] = (
                saved_residuals(p1.checkpoint_dot_policy, *args),
                saved_residuals(direct, *args),
            )
    for two, three in zip(listings[False], listings[True], strict=True):
        assert residual_signature(two) == residual_signature(three)
        # The primitive of each kept value counts: both keep the two products.
        assert sorted(k[2] for k in residual_signature(two).elements() if k[0] == "output") == [
            "dot_general",
            "dot_general",
        ]
    # A checkpointed function differentiated directly: remat2 names its arguments; remat3 named
    # them args[0], ... on JAX 0.10.2 and by name on JAX 0.12. The signature ignores the names.
    two, three = listings[False][1], listings[True][1]
    assert [r.detail for r in two if r.kind == "argument"] == ["w1", "w2", "x"]
    assert [r.detail for r in three if r.kind == "argument"] in (
        ["w1", "w2", "x"],
        ["args[0]", "args[1]", "args[2]"],
    )
    assert all(k[2] is None for k in residual_signature(three) if k[0] == "argument")


# --- checkpoint_dot_policy's page -----------------------------------------------------------------


def _computed(fn, *args):
    return sorted(
        (r.primitive, r.type_str) for r in saved_residuals(fn, *args).excluding_arguments()
    )


def test_worked_example_keeps_tanh_values_without_and_products_with_the_policy():
    """Without a checkpoint, each tanh keeps what JAX's derivative rule for tanh keeps (found in
    this run: ``tanh`` and ``sub`` on JAX 0.10.2, ``one_minus_square`` on 0.12), and the inner
    tanh's output is kept in any case, because the gradient of ``w2`` reads it."""
    w1, w2, x = p1.page_inputs(n=8, d=4)
    one_tanh = _computed(jnp.tanh, x)
    assert one_tanh, "tanh's derivative keeps something"
    inner_output = [] if ("tanh", "f32[8,4]") in one_tanh else [("tanh", "f32[8,4]")]
    plain = _computed(p1.two_tanh_layers, w1, w2, x)
    assert plain == sorted(one_tanh * 2 + inner_output)
    assert sorted(p1.tanh_derivative_keeps(x)) == [p for p, _ in one_tanh]
    keep = jax.checkpoint(p1.two_tanh_layers, policy=DOTS)
    assert _computed(keep, w1, w2, x) == [("dot_general", "f32[8,4]")] * 2
    np.testing.assert_allclose(keep(w1, w2, x), p1.two_tanh_layers(w1, w2, x), rtol=1e-6)


def test_the_forward_value_cannot_tell_the_variants_apart_only_residuals_can():
    args = p1.page_inputs(n=8, d=4)
    values = {name: float(f(*args)) for name, f in p1.VARIANTS.items()}
    assert len({round(v, 4) for v in values.values()}) == 1
    grads = {name: jax.grad(f, argnums=(0, 1, 2))(*args) for name, f in p1.VARIANTS.items()}
    for g in grads.values():
        for a, b in zip(g, grads["no checkpoint"], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    kept = {name: _computed(f, *args) for name, f in p1.VARIANTS.items()}
    assert [p for p, _ in kept["jax.checkpoint, dots_with_no_batch_dims_saveable"]] == [
        "dot_general",
        "dot_general",
    ]
    assert kept["jax.checkpoint, no policy"] == []
    assert "dot_general" not in {p for p, _ in kept["no checkpoint"]}


def test_relu_keeps_a_one_byte_mask_without_checkpoint_and_the_product_with_the_policy():
    params, h = p1.stacked_params("relu_layer", depth=1, batch=2, width=4)
    layer = jax.tree.map(lambda stacked: stacked[0], params)
    plain = saved_residuals(p1.relu_layer, h, layer).excluding_arguments()
    assert ("gt", "bool[2,4]") in [(r.primitive, r.type_str) for r in plain]
    # The zeros JAX's ReLU derivative selects from, as wide as the product (the page says so).
    assert ("broadcast_in_dim", "f32[2,4]") in [(r.primitive, r.type_str) for r in plain]
    kept = _computed(jax.checkpoint(p1.relu_layer, policy=DOTS), h, layer)
    assert kept == [("dot_general", "f32[2,4]")]


def _dot_costs(layer_name):
    layer = getattr(p1, layer_name)
    params, x = p1.stacked_params(layer_name, depth=4, batch=32, width=32)
    variants = {
        "none": layer,
        "full": jax.checkpoint(layer),
        "dots": jax.checkpoint(layer, policy=DOTS),
    }
    return p1.gradient_costs(variants, params, x)


def test_keeping_the_products_costs_memory_on_a_relu_layer():
    costs = _dot_costs("relu_layer")
    none, full, dots = costs["none"], costs["full"], costs["dots"]
    assert dots.temp_bytes > none.temp_bytes  # more, not less
    assert full.temp_bytes < none.temp_bytes
    assert full.flops > dots.flops


def test_keeping_the_products_saves_most_of_the_memory_on_an_mlp_block():
    costs = _dot_costs("mlp_block")
    none, full, dots = costs["none"], costs["full"], costs["dots"]
    assert dots.temp_bytes < 0.5 * none.temp_bytes  # most of the memory back
    assert dots.flops < 1.05 * none.flops  # next to no recomputation
    assert full.temp_bytes < dots.temp_bytes  # keeping nothing goes further...
    assert full.flops > 1.1 * dots.flops  # ...at the price of the products


def test_the_mlp_block_layer_matches_a_numpy_float64_forward():
    params, x = p1.stacked_params("mlp_block", depth=1, batch=3, width=4)
    p = jax.tree.map(lambda stacked: np.asarray(stacked[0], np.float64), params)
    h = np.asarray(x, np.float64)
    normed = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
    z = normed @ p["w1"]
    gelu = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
    _close(p1.mlp_block(x, jax.tree.map(lambda a: a[0], params)), h + gelu @ p["w2"])


def test_a_policy_given_by_name_fails_when_the_gradient_is_traced():
    by_name = jax.checkpoint(p1.without_checkpoint, policy="dots_with_no_batch_dims_saveable")
    with pytest.raises(TypeError, match="'str' object is not callable"):
        jax.grad(by_name)(*p1.page_inputs(n=2, d=3))


def test_dots_saveable_keeps_the_batched_product_and_the_no_batch_policy_does_not():
    w1, _, _ = p1.page_inputs(n=8, d=4)
    xs = jnp.ones((2, 3, 4))
    both = jax.checkpoint(p1.batched_products, policy=jax.checkpoint_policies.dots_saveable)
    plain_only = jax.checkpoint(p1.batched_products, policy=DOTS)
    assert [t for p, t in _computed(both, w1, xs) if p == "dot_general"] == [
        "f32[2,3,4]",
        "f32[6,4]",
    ]
    assert [t for p, t in _computed(plain_only, w1, xs) if p == "dot_general"] == ["f32[6,4]"]


# --- nn_checkpoint_forward's page -----------------------------------------------------------------


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


def test_linen_stack_computes_blocks_one_after_another_with_their_own_parameters():
    x = p2.page_input(batch=3, features=4)
    stack = p2.Stack(features=4, blocks=3)
    variables = stack.init(jax.random.key(0), x)
    kernels = variables["params"]["ScanBlock_0"]["MLP_0"]["Dense_0"]["kernel"]
    assert kernels.shape == (3, 4, 4)
    h = x
    for i in range(3):
        layer = jax.tree.map(lambda a, i=i: a[i], variables["params"]["ScanBlock_0"])
        h = p2.MLP(features=4).apply({"params": layer["MLP_0"]}, h)
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


# --- nnx_remat_policy's page ----------------------------------------------------------------------


def test_nnx_one_block_listing_keeps_masks_without_remat_and_products_with_the_policy():
    graphdef, state = nnx.split(p3.MLP(8, rngs=nnx.Rngs(0)))
    x = p3.page_input(batch=1, features=8)[0]
    plain = _computed(p3.loss_of(graphdef, p3.forward), state, x)
    assert ("gt", "bool[8]") in plain
    assert ("broadcast_in_dim", "f32[8]") in plain  # the zeros ReLU's derivative selects from
    kept = _computed(p3.loss_of(graphdef, nnx.remat(p3.forward, policy=DOTS)), state, x)
    # The two products, and the loss's own 2y (outside the remat).
    assert kept == [("dot_general", "f32[8]")] * 2 + [("mul", "f32[8]")]
    assert ("mul", "f32[8]") in plain


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
    assert costs["whole nothing"].flops > none.flops
    assert costs["block dots"].temp_bytes < costs["whole dots"].temp_bytes
    assert costs["block nothing"].temp_bytes < costs["whole nothing"].temp_bytes
    assert costs["block nothing"].temp_bytes < none.temp_bytes
    assert costs["block nothing"].flops > none.flops
    assert costs["block dots"].temp_bytes > none.temp_bytes  # ReLU: the products cost more


def _stacked(state, layer: str, name: str, i: int) -> np.ndarray:
    """Block ``i`` of a stacked parameter of an NNX state, in float64.

    Read the same way on every Flax release (:func:`examples.compat.variable_value`).
    """
    return np.asarray(compat.variable_value(state[layer][name])[i], np.float64)


def test_nnx_blocks_are_applied_in_order_with_their_own_parameters():
    blocks = p3.make_blocks(blocks=3, features=4)
    x = p3.page_input(batch=2, features=4)
    state = nnx.state(blocks)
    h = np.asarray(x, np.float64)
    for i in range(3):
        k1, b1 = (_stacked(state, "linear1", n, i) for n in ("kernel", "bias"))
        k2, b2 = (_stacked(state, "linear2", n, i) for n in ("kernel", "bias"))
        h = np.maximum(np.maximum(h @ k1 + b1, 0) @ k2 + b2, 0)
    _close(p3.apply_blocks(p3.forward, blocks, x), h)
    step = nnx.remat(p3.forward, policy=DOTS)
    _close(p3.apply_blocks(step, blocks, x), h)


def test_nnx_policy_passed_positionally_raises_a_type_error():
    with pytest.raises(TypeError, match="as an abstract array"):

        @nnx.remat(DOTS)
        def forward_wrong(block, x):
            return block(x)
