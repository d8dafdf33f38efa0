"""The behaviours the answering sections show (examples.howto.answers), each asserted so that a
release that changes one fails here. Independent references: counts of callback runs, NumPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback

from examples.howto import answers
from examples.tools import compat
from examples.tools.residuals import saved_residuals


def test_a_callback_inside_a_checkpoint_runs_again_in_the_backward_pass():
    # jax-ml/jax PR 8907: once in the forward pass, once when the residuals are recomputed.
    for jit in (False, True):
        assert answers.callback_calls(checkpointed=False, jit=jit) == 1
        assert answers.callback_calls(checkpointed=True, jit=jit) == 2


def test_a_checkpoint_inside_a_checkpoint_runs_again_whenever_the_outer_one_does():
    # The questions page (MaxText: remat of the pipeline loop and of the layers inside it): the
    # inner block runs in the forward pass, in the outer checkpoint's recomputation, and once
    # more when its own residuals are recomputed.
    for jit in (False, True):
        assert answers.callback_calls(checkpointed=False, nested=True, jit=jit) == 2
    assert answers.callback_calls(checkpointed=True, nested=True, jit=False) == 3
    # Under jit the releases differ: 2 on jax 0.5.0 and 0.10.2 (the inner block's runs merged),
    # 3 on jax 0.12.0.1, which builds the site.
    jitted = answers.callback_calls(checkpointed=True, nested=True, jit=True)
    assert jitted in (2, 3)
    if compat.jax_version() >= (0, 12):
        assert jitted == 3


def test_the_submodules_own_checkpoint_and_remat_are_gone_or_the_same_function():
    # The questions page: jax.ad_checkpoint.checkpoint and .remat were deprecated (PR 33660)
    # and removed; use jax.checkpoint. Where a release still has them (jax 0.5.0), they give
    # jax.checkpoint's gradient.
    import jax.ad_checkpoint as adc

    f = lambda x: jnp.sin(jnp.sin(x))
    for name in ("checkpoint", "remat"):
        if compat.jax_version() >= (0, 10):  # seen gone on jax 0.10.2 and 0.12.0.1
            assert not hasattr(adc, name)
        elif hasattr(adc, name):
            assert jax.grad(getattr(adc, name)(f))(0.5) == jax.grad(jax.checkpoint(f))(0.5)


def test_a_function_jitted_inside_a_checkpoint_is_traced_once():
    assert answers.inner_jit_traces(steps=3) == 1


def test_io_callback_cannot_be_differentiated_with_or_without_a_checkpoint():
    def logged(x):
        io_callback(lambda v: None, None, x)
        return jnp.sin(x)

    for f in (logged, jax.checkpoint(logged)):
        with pytest.raises(ValueError, match="IO callbacks do not support JVP"):
            jax.grad(lambda x, f=f: f(x).sum())(jnp.ones(3))


def test_a_custom_vjp_forward_rule_runs_twice_under_a_checkpoint():
    assert answers.custom_vjp_calls(optimize_remat=False, checkpointed=False) == ("bwd", "fwd")
    assert answers.custom_vjp_calls(optimize_remat=False) == ("bwd", "fwd", "fwd")


def _optimize_remat_takes_a_side_effect() -> bool:
    """jax 0.5 refuses optimize_remat on a forward rule with a debug callback
    (NotImplementedError: "does not support forward functions with side effects"); later releases
    run it. Found by trying it."""
    try:
        answers.custom_vjp_calls(optimize_remat=True)
    except NotImplementedError:
        return False
    return True


def test_optimize_remat_runs_the_primal_function_instead_of_the_second_forward_rule():
    if not _optimize_remat_takes_a_side_effect():
        pytest.skip(
            f"jax {jax.__version__} refuses optimize_remat on a forward rule with side effects"
        )
    assert answers.custom_vjp_calls(optimize_remat=True) == ("bwd", "f")


def test_jax_0_5_0_refuses_optimize_remat_on_a_forward_rule_with_effects():
    # docs/howto/when-remat-goes-wrong.md's "Across releases" quotes this message.
    if compat.jax_version() >= (0, 5, 1):
        pytest.skip(f"jax {jax.__version__} runs it (the page names jax 0.5.0 only)")
    with pytest.raises(NotImplementedError, match="does not support forward functions with side"):
        answers.custom_vjp_calls(optimize_remat=True)


def _logged(x):
    io_callback(lambda v: None, None, jax.lax.stop_gradient(x))
    return jnp.sin(x)


def test_io_callback_is_differentiable_with_stop_gradient_but_not_inside_a_checkpoint():
    # The page's cells: the same function differentiates without a checkpoint and fails in one.
    got = jax.grad(lambda x: _logged(x).sum())(jnp.ones(3))
    np.testing.assert_allclose(got, np.cos(np.ones(3)), rtol=1e-6)
    refused = r"Effects not supported in .* of `checkpoint`/`remat`"
    with pytest.raises(NotImplementedError, match=refused):
        jax.grad(lambda x: jax.checkpoint(_logged)(x).sum())(jnp.ones(3))


def test_the_kernels_gradient_is_the_same_either_way():
    for optimize in (False, True) if _optimize_remat_takes_a_side_effect() else (False,):
        kernel = jax.checkpoint(answers.make_kernel([], optimize_remat=optimize))
        got = jax.jit(jax.grad(lambda x, k=kernel: k(x) ** 2))(3.2)
        np.testing.assert_allclose(got, 2 * np.sin(3.2) * np.cos(3.2), rtol=1e-5)


@pytest.mark.cpu_figures
def test_remat_changes_the_last_bits_of_the_softmax_gradient_and_nothing_more():
    d = answers.bitwise_differences(seed=0)
    assert d.size == 1024
    assert d.differing > 0, "remat now gives bitwise identical gradients: update the section"
    assert d.relative < 1e-4


def test_the_softmax_loss_matches_numpy():
    x = np.random.default_rng(1).random(16).astype(jnp.bfloat16)
    shifted = (jnp.asarray(x) + 1).astype(np.float32)
    expected = np.exp(np.asarray(shifted, np.float64))
    expected = expected[0] / expected.sum()
    for remat in (False, True):
        np.testing.assert_allclose(answers.softmax_loss(x, remat), expected, rtol=1e-5)


def test_second_derivatives_through_a_checkpoint_keep_the_custom_rule():
    with_remat, without = answers.second_derivatives(2.0)
    # d/dx [2 cos(s(x)) * 2 cos(x)] with s = sin: the doubled rule applied at both levels.
    s = np.sin(2.0)
    expected = 4 * (-np.sin(s) * 2 * np.cos(2.0) * np.cos(2.0) + np.cos(s) * -np.sin(2.0))
    np.testing.assert_allclose(with_remat, without, rtol=1e-6)
    np.testing.assert_allclose(with_remat, expected, rtol=1e-5)


def test_forward_mode_and_hessians_go_through_a_checkpoint():
    primal, tangent = jax.jvp(jax.checkpoint(jnp.sin), (1.0,), (1.0,))
    np.testing.assert_allclose([primal, tangent], [np.sin(1.0), np.cos(1.0)], rtol=1e-6)
    hess = jax.hessian(jax.checkpoint(lambda v: jnp.sum(jnp.sin(v) ** 2)))(jnp.ones(2))
    np.testing.assert_allclose(np.diag(hess), 2 * np.cos(2.0) * np.ones(2), rtol=1e-5)


def _listing(names):
    ws, h = answers.scan_inputs()
    return saved_residuals(answers.scan_offload_loss(names), ws, h)


def test_naming_the_scanned_output_offloads_nothing():
    # jax-ml/jax issue 23869: the carry is kept by the scan, not by the body's checkpoint.
    nothing, carry = _listing([]), _listing(["residual"])
    assert [(r.shape, r.on_host) for r in carry] == [(r.shape, r.on_host) for r in nothing]
    assert not any(r.on_host for r in carry)


def test_naming_a_value_inside_the_body_offloads_it():
    memories = getattr(jax.devices()[0], "addressable_memories", lambda: [])()
    if "pinned_host" not in {m.kind for m in memories}:
        pytest.skip(f"jax {jax.__version__}'s {jax.default_backend()} device has no host memory")
    inside = _listing(["hidden"])
    assert sum(r.on_host for r in inside) == 1
    assert len(inside) == len(_listing([])) + 1


def test_naming_the_bodys_input_offloads_the_carries():
    # MaxText's decoder_layer_input: the name at the top of the checkpointed body reaches the
    # stacked carries the scan keeps, which naming the output does not.
    memories = getattr(jax.devices()[0], "addressable_memories", lambda: [])()
    if "pinned_host" not in {m.kind for m in memories}:
        pytest.skip(f"jax {jax.__version__}'s {jax.default_backend()} device has no host memory")
    nothing, carry = _listing([]), _listing(["layer_input"])
    assert (3, 2, 4) in [r.shape for r in nothing if not r.on_host]  # the carries, on the device
    assert [r.shape for r in carry if r.on_host] == [(3, 2, 4)]
    assert (3, 2, 4) not in [r.shape for r in carry if not r.on_host]


def test_the_scanned_loss_matches_a_python_loop():
    ws, h = answers.scan_inputs()
    ref = np.asarray(h, np.float64)
    for w in np.asarray(ws, np.float64):
        ref = ref + np.sin(ref @ w) @ w
    for names in ([], ["hidden"], ["residual"], ["layer_input"]):
        np.testing.assert_allclose(answers.scan_offload_loss(names)(ws, h), ref.sum(), rtol=1e-5)


def test_a_fresh_interpreter_needs_the_submodule_import():
    if not hasattr(jax, "ad_checkpoint"):  # pragma: no cover - this process imported it
        pytest.fail("examples imports jax.ad_checkpoint, so this process must see it")
    bare = answers.fresh_interpreter("import jax\nprint(jax.ad_checkpoint.print_saved_residuals)")
    if "AttributeError" not in bare:
        pytest.skip(f"needs jax 0.9.1 (jax-ml/jax issue 35873): jax {jax.__version__} exposes it")
    assert "has no attribute 'ad_checkpoint'" in bare
    explicit = answers.fresh_interpreter(
        "import jax.ad_checkpoint\nprint(callable(jax.ad_checkpoint.print_saved_residuals))"
    )
    assert explicit == "True"


def test_fresh_interpreter_reports_a_failure_by_its_last_line():
    assert answers.fresh_interpreter("raise KeyError('x')") == "KeyError: 'x'"
    assert answers.fresh_interpreter("print(6 * 7)") == "42"


def test_remat_scan_refuses_partitioned_parameters():
    # Flax issue 3870, cited by docs/howto/remat-linen.md: remat_scan has no metadata_params.
    nn = pytest.importorskip("flax.linen")
    from flax.errors import PartitioningUnspecifiedError

    layer = nn.remat_scan(nn.Dense, lengths=(2,))(
        3, kernel_init=nn.with_partitioning(nn.initializers.lecun_normal(), ("model",))
    )
    with pytest.raises(PartitioningUnspecifiedError):
        layer.init(jax.random.key(0), jnp.zeros((3,)))


def test_a_checkpointed_scan_body_evaluates_without_differentiation():
    # jax-ml/jax issue 2030 (an old release) failed here; a checkpoint only matters under autodiff.
    def body(c, w):
        return jnp.sin(c @ w), None

    ws, h = answers.scan_inputs()
    plain = jax.lax.scan(body, h, ws)[0]
    rematted = jax.jit(lambda ws, h: jax.lax.scan(jax.checkpoint(body), h, ws)[0])(ws, h)
    np.testing.assert_allclose(rematted, plain, rtol=1e-6)
