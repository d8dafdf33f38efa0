"""examples.problems.scan_remat_body: its reference against NumPy float64, and every claim its
page makes. Three of its reference tests also cover save_only_named or nnx_scan_remat (each is
one test over several problems)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from problems._helpers import _close

from examples.problems import checkpoint_dot_policy as dots_problem
from examples.problems import nnx_scan_remat as p5
from examples.problems import save_only_named as p6
from examples.problems import scan_remat_body as p4
from examples.tools.residuals import saved_residuals

# --- the reference against NumPy ------------------------------------------------------------------


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


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("module", [p4, p6], ids=["scan_remat_body", "save_only_named"])
def test_references_match_numpy_value_and_gradients(module, seed):
    problem = module.PROBLEM
    for case in module.make_cases(np.random.default_rng(seed)):
        _close(problem.reference(*case.args), case.expected)
        grads = jax.grad(problem.reference, argnums=(0, 1, 2))(*case.args)
        for got, want in zip(grads, case.expected_grads, strict=True):
            _close(got, want)


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


def test_each_problems_first_case_has_several_layers_for_the_residuals_check():
    assert p4.make_cases(np.random.default_rng(0))[0].args[0].shape[0] > 1
    assert p5.make_cases(np.random.default_rng(0))[0].args[3] > 1
    for _n, d, hidden in p6.SHAPES:
        assert d != hidden


# --- the page -------------------------------------------------------------------------------------


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


def test_the_checkpointed_step_recomputes_its_first_product_and_around_the_scan_both():
    """The page: the gradient holds 11 matrix products without checkpoint (input layer 1 + 1,
    output layer 1 + 2, the scanned block 2 + 4), 12 with the checkpointed step (the block's first
    product again: the second's output is read by nothing) and 13 around the scan (both again)."""
    stacked, x = dots_problem.stacked_params("mlp_block", depth=4, batch=8, width=16)
    params = p4.model_params(stacked, width=16)
    products = {
        name: p4.traced_size(loss, params, x)[1]
        for name, loss in {
            "none": p4.scan_model(_step),
            "body": p4.scan_model(jax.checkpoint(_step)),
            "around": p4.scan_model(_step, checkpoint_scan=True),
        }.items()
    }
    assert products == {"none": 11, "body": 12, "around": 13}
    # Not recomputed because nothing reads it: put a tanh after the second product, whose
    # derivative reads that output, and the checkpointed step computes both products again.
    from examples.problems.checkpoint_dot_policy import rms_norm

    def read_step(h, p):
        return h + jnp.tanh(jax.nn.gelu(rms_norm(h) @ p["w1"]) @ p["w2"]), None

    assert p4.traced_size(p4.scan_model(read_step), params, x)[1] == 11
    assert p4.traced_size(p4.scan_model(jax.checkpoint(read_step)), params, x)[1] == 13


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
