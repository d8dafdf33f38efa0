"""The problems scan_remat_body, nnx_scan_remat and save_only_named: their references against
NumPy float64, the checker's placement and names checks under both remat implementations, and
every claim their pages make."""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from jax.ad_checkpoint import checkpoint_name
from remat_modes import REMAT_MODES

from examples.check import main
from examples.compat import set_variable_value
from examples.jaxprs import (
    checkpoint_names,
    jit_inlined,
    primitive_counts,
    remat3,
    remat_sites,
)
from examples.problems import all_problems, load_problem
from examples.problems import checkpoint_dot_policy as dots_problem
from examples.problems import nnx_scan_remat as p5
from examples.problems import save_only_named as p6
from examples.problems import scan_remat_body as p4
from examples.problems._checks import (
    OTHER_NAME,
    compare_policy,
    policy_name,
    residual_listing,
)
from examples.problems._placement import place
from examples.residuals import saved_residuals

P = jax.checkpoint_policies
DOTS = P.dots_with_no_batch_dims_saveable
NOTHING = P.nothing_saveable


@pytest.fixture(autouse=True)
def _full_float32_products():
    with jax.default_matmul_precision("highest"):
        yield


def _mode(under_remat3):
    return remat3(True) if under_remat3 else contextlib.nullcontext()


def _close(actual, expected, rtol=1e-4, atol=1e-6):
    actual = np.asarray(actual, np.float64)
    scale = np.max(np.abs(expected), initial=0.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol + rtol * scale)


def _finite_differences(f, args, eps=1e-6):
    """Central differences of the scalar ``f(*args)`` with respect to each array in ``args``."""
    grads = []
    for i, arg in enumerate(args):
        numeric = np.zeros_like(arg)
        for index in np.ndindex(arg.shape):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[i][index] += eps
            down[i][index] -= eps
            numeric[index] = (f(*up) - f(*down)) / (2 * eps)
        grads.append(numeric)
    return grads


# --- the list of problems ---------------------------------------------------------------------


def test_the_checker_lists_six_problems_in_order(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("problems:\n", 1)[1].splitlines() if line]
    assert listed == [p.name for p in all_problems()]
    assert len(listed) >= 6
    assert listed[3:6] == ["scan_remat_body", "nnx_scan_remat", "save_only_named"]


# --- the references against NumPy --------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("module", [p4, p6], ids=["scan_remat_body", "save_only_named"])
def test_references_match_numpy_value_and_gradients(module, seed):
    problem = module.PROBLEM
    for case in module.make_cases(np.random.default_rng(seed)):
        _close(problem.reference(*case.args), case.expected)
        grads = jax.grad(problem.reference, argnums=(0, 1, 2))(*case.args)
        for got, want in zip(grads, case.expected_grads, strict=True):
            _close(got, want)


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


def test_hand_gradients_match_finite_differences():
    rng = np.random.default_rng(5)
    ws, bs, x = (
        rng.standard_normal((3, 4, 4)) * 0.5,
        rng.standard_normal((3, 4)),
        rng.normal(size=(2, 4)),
    )
    numeric = _finite_differences(lambda *a: float(p4.reference_f64(*a)[0]), [ws, bs, x])
    for got, want in zip(p4.reference_f64(ws, bs, x)[1], numeric, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    w1, w2, x = rng.standard_normal((3, 5)), rng.standard_normal((5, 3)), rng.normal(size=(2, 3))
    numeric = _finite_differences(lambda *a: float(p6.reference_f64(*a)[0]), [w1, w2, x])
    for got, want in zip(p6.reference_f64(w1, w2, x)[1], numeric, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    params = p5.reference_params(3, 2, 2)
    ct = rng.standard_normal((2, 2))
    x = rng.standard_normal((2, 2))
    (numeric,) = _finite_differences(
        lambda x: float(np.sum(p5.reference_f64(params, x, ct)[0] * ct)), [x]
    )
    np.testing.assert_allclose(p5.reference_f64(params, x, ct)[1], numeric, rtol=1e-5, atol=1e-6)


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


def test_each_problems_first_case_has_several_layers_for_the_residuals_check():
    assert p4.make_cases(np.random.default_rng(0))[0].args[0].shape[0] > 1
    assert p5.make_cases(np.random.default_rng(0))[0].args[3] > 1
    for _n, d, hidden in p6.SHAPES:
        assert d != hidden


# --- the machinery: sites, names, jit inlined --------------------------------------------------


def _layer(h, wb):
    w, b = wb
    return jnp.tanh(h @ w + b), None


def _scan(layer):
    def f(ws, bs, x):
        h, _ = jax.lax.scan(layer, x, (ws, bs))
        return jnp.sum(h**2)

    return f


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_remat_sites_know_whether_they_sit_in_a_scan_or_around_one(under_remat3):
    args = p4.page_inputs()
    with _mode(under_remat3):
        (inside,) = remat_sites(jax.make_jaxpr(_scan(jax.checkpoint(_layer)))(*args).jaxpr)
        (around,) = remat_sites(jax.make_jaxpr(jax.checkpoint(_scan(_layer)))(*args).jaxpr)
        jitted = jax.jit(_scan(jax.checkpoint(_layer)))
        (in_jit,) = remat_sites(jax.make_jaxpr(jitted)(*args).jaxpr)
    assert inside.within == ("scan",)
    assert (inside.contains("scan"), inside.products) == (0, 1)
    assert around.within == ()
    assert (around.contains("scan"), around.products) == (1, 1)
    assert in_jit.within[-1] == "scan"
    assert in_jit.within[0] in {"jit", "pjit"}


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_checkpoint_names_are_found_under_either_implementation(under_remat3):
    w1, w2, x = p6.make_cases(np.random.default_rng(0))[0].args
    with _mode(under_remat3):
        jaxpr = jax.make_jaxpr(p6.save_only_named)(w1, w2, x).jaxpr
        primitives = primitive_counts(jaxpr)
    (site,) = remat_sites(jaxpr)
    assert checkpoint_names(jaxpr) == {"hidden": 1}
    assert checkpoint_names(site.jaxpr) == {"hidden": 1}
    # What the name traces to is what differs: the primitive `name`, or a hi primitive.
    assert ("name" in primitives) is (not under_remat3)
    unnamed = jax.make_jaxpr(dots_problem.checkpoint_dot_policy)(*dots_problem.page_inputs(2, 3))
    assert checkpoint_names(unnamed.jaxpr) == {}


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_jit_inlined_lists_the_values_inside_jit_and_keeps_the_scan(under_remat3):
    args = p4.page_inputs()
    with _mode(under_remat3):
        fn = _scan(jax.checkpoint(_layer))
        plain = residual_listing(fn, *args)
        jitted = residual_listing(jax.jit(fn), *args)
        np.testing.assert_allclose(jit_inlined(jax.jit(fn), *args)(*args), fn(*args), rtol=1e-6)
        with jax.disable_jit():
            unrolled = saved_residuals(fn, *args)
    kinds = sorted((r.kind, r.type_str) for r in plain.excluding_arguments())
    assert kinds == sorted((r.kind, r.type_str) for r in jitted.excluding_arguments())
    assert ("output", "f32[4,8,4]") in kinds  # one carry per layer, stacked: the scan stays
    assert not any(r.kind == "jitted" for r in jitted)
    # jax.disable_jit would unroll the scan into one value per layer.
    assert len(unrolled.excluding_arguments()) > len(plain.excluding_arguments())


# --- the placement check ------------------------------------------------------------------------


def _placement(problem, fn, *args):
    return place(problem, jax.make_jaxpr(fn)(*args).jaxpr)


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_placement_in_a_scan(under_remat3):
    problem = p4.PROBLEM
    args = p4.page_inputs()

    def loop(ws, bs, x):
        h = x
        for i in range(ws.shape[0]):
            h, _ = jax.checkpoint(_layer)(h, (ws[i], bs[i]))
        return jnp.sum(h**2)

    def checkpoint_on_the_loss(ws, bs, x):
        h, _ = jax.lax.scan(_layer, x, (ws, bs))
        return jax.checkpoint(lambda h: jnp.sum(h**2))(h)

    with _mode(under_remat3):
        right = _placement(problem, _scan(jax.checkpoint(_layer)), *args)
        both = _placement(problem, jax.checkpoint(_scan(jax.checkpoint(_layer))), *args)
        no_scan = _placement(problem, loop, *args)
        outside = _placement(problem, checkpoint_on_the_loss, *args)
        nothing = _placement(problem, _scan(_layer), *args)
    assert right.ok
    assert len(right.placed) == 1
    assert "sits in the scan's body" in right.detail
    assert "none surrounds the scan" in right.detail
    # A checkpoint in the body and one around the scan: the one around fails it, the policy of
    # the one inside is still judged.
    assert not both.ok
    assert "surrounds the whole scan" in both.detail
    assert len(both.placed) == 1
    assert "nested inside another" not in both.detail
    assert not no_scan.ok
    assert "no scan in the traced function" in no_scan.detail
    assert no_scan.placed == ()
    assert "no scan" in no_scan.no_policy_reason
    assert not outside.ok
    assert "sit outside the scan" in outside.detail
    assert not nothing.ok
    assert "no checkpoint in the traced function" in nothing.detail


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_placement_with_names(under_remat3):
    problem = p6.PROBLEM
    args = p6.make_cases(np.random.default_rng(0))[0].args

    def named_outside(w1, w2, x):
        x = checkpoint_name(x, "hidden")  # outside the checkpoint, which has both products
        return jax.checkpoint(lambda w1, w2, x: jnp.sum((jnp.tanh(x @ w1) @ w2) ** 2))(w1, w2, x)

    def named_otherwise(w1, w2, x):
        def f(w1, w2, x):
            return jnp.sum((jnp.tanh(checkpoint_name(x @ w1, "pre")) @ w2) ** 2)

        return jax.checkpoint(f)(w1, w2, x)

    with _mode(under_remat3):
        right = _placement(problem, p6.save_only_named, *args)
        outside = _placement(problem, named_outside, *args)
        otherwise = _placement(problem, named_otherwise, *args)
    assert right.ok
    assert "with the value named 'hidden' inside it" in right.detail
    assert not outside.ok
    assert "named outside the checkpoint, where its policy cannot see it" in outside.detail
    assert not otherwise.ok
    assert "no value inside the checkpoint is named 'hidden' (the names in it: 'pre')" in (
        otherwise.detail
    )
    # The checkpoint is there around the products: its policy can still be judged.
    assert len(otherwise.placed) == 1


# --- names-based policies -----------------------------------------------------------------------


@pytest.mark.parametrize("under_remat3", REMAT_MODES)
def test_compare_policy_tells_names_policies_apart(under_remat3):
    required = P.save_only_these_names("hidden")
    names = ("hidden",)
    with _mode(under_remat3):
        assert compare_policy(P.save_only_these_names("hidden"), required, names=names)[0]
        for wrong, text in (
            (P.save_only_these_names("Hidden"), "save_only_these_names('Hidden')"),
            (P.save_only_these_names(("hidden",)), "save_only_these_names(('hidden',))"),
            (P.save_any_names_but_these("hidden"), "save_any_names_but_these('hidden')"),
            (NOTHING, "nothing_saveable"),
            (DOTS, "dots_with_no_batch_dims_saveable"),
            (None, "no policy"),
        ):
            ok, detail = compare_policy(wrong, required, names=names)
            assert not ok, text
            assert text in detail, detail
        # A second name that the probe carries (as a program's other names) is another policy;
        # one that no value carries keeps the same values, so it passes, and the checker says why.
        extra = P.save_only_these_names("hidden", OTHER_NAME)
        assert not compare_policy(extra, required, names=names)[0]
        ok, detail = compare_policy(P.save_only_these_names("hidden", "x"), required, names=names)
        assert ok
        assert "another object, but it keeps exactly what" in detail
        # Without the problem's names on the probe, a names policy that keeps another name
        # would look like nothing_saveable; with them it does not.
        assert not compare_policy(P.save_only_these_names("other"), required, names=names)[0]


def test_policy_names_read_like_the_call_that_made_them():
    assert policy_name(P.save_only_these_names("b", "a")) == "save_only_these_names('a', 'b')"
    assert policy_name(P.save_any_names_but_these("x")) == "save_any_names_but_these('x')"
    assert policy_name(DOTS) == "dots_with_no_batch_dims_saveable"


# --- scan_remat_body's page -----------------------------------------------------------------------


def _step(h, p):
    return dots_problem.mlp_block(h, p), None


def _scan_loss(step):
    def loss(params, x):
        h, _ = jax.lax.scan(step, x, params)
        return jnp.mean(h**2)

    return loss


def test_scan_worked_example_keeps_every_intermediate_without_and_one_carry_with():
    params, x = dots_problem.stacked_params("mlp_block", depth=4, batch=2, width=4)
    plain = saved_residuals(_scan_loss(_step), params, x).excluding_arguments()
    kept = saved_residuals(_scan_loss(jax.checkpoint(_step)), params, x).excluding_arguments()
    stacked = [r.type_str for r in plain if r.primitive == "scan"]
    assert len(stacked) > 5
    assert "f32[4,2,16]" in stacked
    assert [r.type_str for r in kept if r.primitive == "scan"] == ["f32[4,2,4]"]
    # The checkpoint changes what is kept, not the gradient.
    for a, b in zip(
        jax.tree.leaves(jax.grad(_scan_loss(_step))(params, x)),
        jax.tree.leaves(jax.grad(_scan_loss(jax.checkpoint(_step)))(params, x)),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_checkpointing_the_step_saves_memory_and_around_the_scan_saves_nothing():
    stacked, x = dots_problem.stacked_params("mlp_block", depth=4, batch=32, width=32)
    params = p4.model_params(stacked, width=32)
    costs = p4.gradient_costs(
        {
            "none": p4.scan_model(_step),
            "body": p4.scan_model(jax.checkpoint(_step)),
            "around": p4.scan_model(_step, checkpoint_scan=True),
        },
        params,
        x,
    )
    none, body, around = costs["none"], costs["body"], costs["around"]
    assert body.temp_bytes < 0.5 * none.temp_bytes
    assert body.flops > none.flops
    assert around.temp_bytes >= 0.95 * none.temp_bytes  # saves nothing...
    assert around.flops > none.flops  # ...and recomputes


def test_jax_documents_prevent_cse_as_unnecessary_inside_a_scan():
    doc = " ".join((jax.checkpoint.__doc__ or "").split())
    assert "like when used inside a :func:`~jax.lax.scan`, this CSE prevention mechanism is" in doc
    assert "``prevent_cse`` can be set to False" in doc


def test_a_python_loop_grows_the_program_with_depth_and_the_scan_does_not():
    sizes = {}
    for depth in (4, 16):
        layers, h = dots_problem.stacked_params("mlp_block", depth=depth, batch=8, width=16)
        p = p4.model_params(layers, 16)
        sizes[depth] = (
            p4.traced_size(p4.scan_model(jax.checkpoint(_step)), p, h),
            p4.traced_size(p4.python_loop_model(jax.checkpoint(_step)), p, h),
        )
    assert sizes[4][0] == sizes[16][0]
    (eqns4, dots4), (eqns16, dots16) = sizes[4][1], sizes[16][1]
    assert eqns16 > 3 * eqns4
    assert dots16 > 3 * dots4


def test_checkpointing_part_of_the_layer_keeps_more():
    stacked, x = dots_problem.stacked_params("mlp_block", depth=4, batch=2, width=4)
    params = p4.model_params(stacked, 4)

    def computed(step):
        return saved_residuals(p4.scan_model(step), params, x).excluding_arguments()

    partly, whole = computed(p4.partly_checkpointed_step), computed(jax.checkpoint(_step))
    assert len(partly) > len(whole)
    assert partly.nbytes > whole.nbytes
    # The part-checkpointed step computes the same block.
    np.testing.assert_allclose(
        p4.partly_checkpointed_step(x, jax.tree.map(lambda a: a[0], stacked))[0],
        dots_problem.mlp_block(x, jax.tree.map(lambda a: a[0], stacked)),
        rtol=1e-6,
    )


# --- nnx_scan_remat's page ------------------------------------------------------------------------

_over_blocks = functools.partial(nnx.scan, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)


def _nnx_step(x, block):
    return block(x)


def test_nnx_blocks_are_stacked_by_vmap():
    blocks = p5.make_blocks(seed=0, features=8, layers=4)
    assert blocks.linear1.kernel.shape == (4, 8, 32)
    assert blocks.linear2.kernel.shape == (4, 32, 8)


def test_nnx_listing_keeps_gelu_values_without_remat_and_product_and_carry_with():
    graphdef, state = nnx.split(p5.make_blocks(seed=0, features=4, layers=3))
    x = p5.page_input(batch=2, features=4)

    def stacked(apply):
        listing = saved_residuals(p5.loss_of(graphdef, apply), state, x)
        return sorted(r.type_str for r in listing if r.primitive == "scan")

    plain = stacked(_over_blocks(_nnx_step))
    assert plain.count("f32[3,2,16]") > 2
    assert stacked(_over_blocks(nnx.remat(_nnx_step, policy=DOTS))) == ["f32[3,2,16]", "f32[3,2,4]"]

    # Under remat the GELU's input (product + bias) is recomputed, so linear1's bias is read on
    # the backward pass; without remat it is not (the page says so).
    def arguments(apply):
        listing = saved_residuals(p5.loss_of(graphdef, apply), state, x)
        return {r.detail for r in listing if r.kind == "argument"}

    bias = [a for a in arguments(_over_blocks(nnx.remat(_nnx_step, policy=DOTS))) if "bias" in a]
    assert len(bias) == 1
    assert "linear1" in bias[0]
    assert not any("bias" in a for a in arguments(_over_blocks(_nnx_step)))


def test_nnx_remat_on_the_step_pays_and_around_the_scan_does_not():
    graphdef, state = nnx.split(p5.make_blocks(seed=0, features=32, layers=4))
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
    assert costs["step dots"].temp_bytes < 0.5 * none.temp_bytes  # most of the memory back
    assert costs["step dots"].flops < 1.05 * none.flops  # next to no recomputation
    assert costs["step nothing"].temp_bytes < costs["step dots"].temp_bytes  # further...
    assert costs["step nothing"].flops > 1.05 * costs["step dots"].flops  # ...at a price
    for around in ("around dots", "around nothing"):
        assert costs[around].temp_bytes >= 0.95 * none.temp_bytes  # neither helps
        assert costs[around].flops >= none.flops


def test_blocks_from_split_rngs_have_the_shapes_but_not_the_parameters():
    @nnx.split_rngs(splits=4)
    @nnx.vmap(in_axes=(0,), out_axes=0)
    def blocks_from_rngs(rngs):
        return p5.Block(8, rngs=rngs)

    other = blocks_from_rngs(nnx.Rngs(0))
    ours = p5.make_blocks(seed=0, features=8, layers=4)
    assert other.linear1.kernel.shape == ours.linear1.kernel.shape
    assert np.max(np.abs(other.linear1.kernel[...] - ours.linear1.kernel[...])) > 0.01


# --- save_only_named's page -----------------------------------------------------------------------


def _one_layer():
    stacked, h = dots_problem.stacked_params("mlp_block", depth=1, batch=2, width=4)
    return h, jax.tree.map(lambda a: a[0], stacked)


def _kept(policy):
    h, p = _one_layer()
    listing = saved_residuals(jax.checkpoint(p6.named_mlp_block, policy=policy), h, p)
    return sorted((r.kind, r.detail, r.type_str) for r in listing.excluding_arguments())


def test_named_block_is_the_mlp_block_with_two_name_equations():
    h, p = _one_layer()
    jaxpr = jax.make_jaxpr(p6.named_mlp_block)(h, p)
    assert checkpoint_names(jaxpr) == {"normed": 1, "mlp_pre": 1}
    assert "name[name=mlp_pre]" in jaxpr.pretty_print(use_color=False)
    np.testing.assert_allclose(
        p6.named_mlp_block(h, p), dots_problem.mlp_block(h, p), rtol=1e-6, atol=1e-7
    )


def test_names_policies_keep_exactly_the_named_values():
    assert _kept(P.save_only_these_names("mlp_pre")) == [("named", "mlp_pre", "f32[2,16]")]
    assert _kept(P.save_only_these_names("normed", "mlp_pre")) == [
        ("named", "mlp_pre", "f32[2,16]"),
        ("named", "normed", "f32[2,4]"),
    ]
    # The dots policy keeps the first product only: the one the backward pass reads.
    assert _kept(DOTS) == [("output", "dot_general", "f32[2,16]")]
    assert _kept(P.save_any_names_but_these("mlp_pre")) == [("named", "normed", "f32[2,4]")]


def test_a_missing_name_or_a_tuple_of_names_keeps_what_nothing_saveable_keeps():
    h, p = _one_layer()
    nothing = saved_residuals(jax.checkpoint(p6.named_mlp_block, policy=NOTHING), h, p)
    for policy in (P.save_only_these_names("mlp-pre"), P.save_only_these_names(("normed", "x"))):
        assert saved_residuals(jax.checkpoint(p6.named_mlp_block, policy=policy), h, p) == nothing
    assert _kept(NOTHING) == []


def test_names_given_as_a_list_raise_type_error():
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        P.save_only_these_names(["normed", "mlp_pre"])


def test_names_change_nothing_without_a_checkpoint():
    h, p = _one_layer()
    named = saved_residuals(p6.named_mlp_block, h, p).excluding_arguments()
    unnamed = saved_residuals(dots_problem.mlp_block, h, p).excluding_arguments()
    assert sorted(r.type_str for r in named) == sorted(r.type_str for r in unnamed)


def test_keeping_the_named_product_matches_dots_and_adding_normed_costs_memory():
    stacked, x = dots_problem.stacked_params("mlp_block", depth=4, batch=32, width=32)
    block = p6.named_mlp_block
    costs = dots_problem.gradient_costs(
        {
            "none": block,
            "nothing": jax.checkpoint(block, policy=NOTHING),
            "dots": jax.checkpoint(block, policy=DOTS),
            "pre": jax.checkpoint(block, policy=P.save_only_these_names("mlp_pre")),
            "both": jax.checkpoint(block, policy=P.save_only_these_names("normed", "mlp_pre")),
        },
        stacked,
        x,
    )
    none, nothing, dots, pre, both = costs.values()
    assert pre.temp_bytes < 0.5 * none.temp_bytes
    assert abs(pre.temp_bytes - dots.temp_bytes) <= 0.02 * dots.temp_bytes
    assert abs(pre.flops - dots.flops) <= 0.02 * dots.flops
    assert both.temp_bytes > pre.temp_bytes
    assert both.flops <= 1.02 * pre.flops  # saves no FLOPs that count
    assert nothing.temp_bytes < pre.temp_bytes
    assert nothing.flops > 1.05 * pre.flops


# --- all three, through the checker ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["scan_remat_body", "nnx_scan_remat", "save_only_named"])
def test_the_problems_declare_their_structure(name):
    problem = load_problem(name)
    assert problem.inside_scan is (name != "save_only_named")
    assert problem.names == (("hidden",) if name == "save_only_named" else ())
