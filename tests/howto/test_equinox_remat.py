"""examples.howto.equinox_remat: what ``jax.checkpoint`` refuses in an Equinox model, Equinox's
``filter_checkpoint``, and the checkpointed scan over stacked layers, on the installed releases.

Gradients are checked against the plain gradient (no checkpoint) and against one computed in
float64 by JAX alone, on the model's arrays taken out of Equinox."""

from __future__ import annotations

import warnings

import pytest

# Equinox is in the test, docs and notebooks locks, not in the package's dependencies: the release
# matrix (the package's dependencies and pytest) has no Equinox, and these tests skip there.
eqx = pytest.importorskip(
    "equinox", reason="needs Equinox (`pip install equinox`; the test and docs locks install it)"
)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from examples.howto import equinox_remat as er  # noqa: E402
from examples.tools import compat  # noqa: E402
from examples.tools.measure import compiled_stats  # noqa: E402
from examples.tools.residuals import saved_residuals  # noqa: E402

P = jax.checkpoint_policies
KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def mlp_and_x():
    return er.make_mlp(KEY), er.inputs(jax.random.key(1))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def test_the_installed_equinox_has_filter_checkpoint():
    assert _version(er.equinox_version()) >= _version(er.FILTER_CHECKPOINT_SINCE)
    assert callable(eqx.filter_checkpoint)


def _float64_reference(model, x):
    """The gradient of the loss for the model's arrays, in float64, by jax.grad on a pure function
    of those arrays (the same MLP written out: relu between layers, the identity at the end)."""
    layers = [
        (np.asarray(lin.weight, np.float64), np.asarray(lin.bias, np.float64))
        for lin in model.layers
    ]

    def pure(weights, x):
        h = x
        for i, (w, b) in enumerate(weights):
            h = h @ w.T + b
            if i < len(weights) - 1:
                h = jax.nn.relu(h)
        return jnp.mean(h**2)

    with compat.enable_x64(True):
        grads = jax.grad(pure)(
            [(jnp.asarray(w), jnp.asarray(b)) for w, b in layers],
            jnp.asarray(np.asarray(x, np.float64)),
        )
        return [(np.asarray(w), np.asarray(b)) for w, b in grads]


def test_the_mlp_holds_functions_beside_its_arrays(mlp_and_x):
    mlp, _ = mlp_and_x
    others = er.non_array_leaves(mlp)
    assert len(others) == 2
    assert all(callable(leaf) for leaf in others)
    table = er.leaf_table(mlp)
    assert table.column("an array").count("no") == 2
    assert ".activation" in table.column("leaf")


def test_jax_checkpoint_refuses_the_mlp(mlp_and_x):
    mlp, x = mlp_and_x
    with pytest.raises(TypeError, match="custom_jvp"):
        jax.checkpoint(er.loss)(mlp, x)
    with pytest.raises(TypeError, match="custom_jvp"):
        jax.grad(jax.checkpoint(er.loss))(mlp, x)


def test_filter_checkpoint_gives_the_plain_gradient_and_the_float64_one(mlp_and_x):
    mlp, x = mlp_and_x
    plain = er.array_grads(er.loss, mlp, x)
    for policy in (None, P.dots_saveable, P.nothing_saveable):
        checkpointed = er.array_grads(er.checkpointed_loss(policy), mlp, x)
        assert er.largest_difference(plain, checkpointed) <= 1e-6
    reference = _float64_reference(mlp, x)
    for layer, (w, b) in zip(plain.layers, reference, strict=True):
        np.testing.assert_allclose(layer.weight, w, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(layer.bias, b, rtol=1e-4, atol=1e-6)


def test_the_policy_reaches_jax_through_filter_checkpoint(mlp_and_x):
    mlp, x = mlp_and_x
    listings = {}
    for label, policy in (("none", None), ("dots", P.dots_saveable)):
        f, params = er.on_arrays(er.checkpointed_loss(policy), mlp)
        listings[label] = saved_residuals(f, params, x)
    assert listings["none"].excluding_arguments() == ()
    kept = listings["dots"].excluding_arguments()
    assert len(kept) == len(mlp.layers)  # one product per layer
    assert kept
    assert all(r.primitive == "dot_general" for r in kept)


def test_jax_tools_take_the_arrays_only(mlp_and_x):
    mlp, x = mlp_and_x
    with pytest.raises(TypeError, match="abstract array"):
        saved_residuals(er.loss, mlp, x)
    with pytest.raises(TypeError, match="abstract array"):
        jax.jit(er.loss)(mlp, x)
    f, params = er.on_arrays(er.loss, mlp)
    assert all(eqx.is_array(leaf) for leaf in jax.tree_util.tree_leaves(params))
    assert float(f(params, x)) == float(er.loss(mlp, x))


def test_a_method_under_filter_checkpoint_and_under_jax_checkpoint(mlp_and_x):
    _, x = mlp_and_x
    plain = er.array_grads(er.loss, er.Block(16, 64, key=KEY), x)
    checkpointed = er.array_grads(er.loss, er.CheckpointedBlock(16, 64, key=KEY), x)
    assert er.largest_difference(plain, checkpointed) <= 1e-6
    with pytest.raises(TypeError, match="function"):
        er.array_grads(er.loss, er.JaxCheckpointedBlock(16, 64, key=KEY), x)


def test_a_flag_becomes_a_tracer_under_jax_checkpoint(mlp_and_x):
    _, x = mlp_and_x
    dropout = eqx.nn.Dropout(0.5)
    assert {type(leaf) for leaf in er.non_array_leaves(dropout)} == {float, bool}
    with pytest.raises(jax.errors.TracerBoolConversionError, match="inference"):
        jax.checkpoint(lambda d, x, k: d(x, key=k))(dropout, x, KEY)
    out = eqx.filter_checkpoint(lambda d, x, k: d(x, key=k))(dropout, x, KEY)
    assert out.shape == x.shape


def test_a_checkpointed_layer_in_a_field_warns_hides_its_weights_and_fails():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = er.wrap_a_layer_in_a_field(KEY)
    assert any("JAX-transformed callable" in str(w.message) for w in caught)
    leaves = jax.tree_util.tree_leaves(module)
    assert not any(eqx.is_array(leaf) for leaf in leaves)
    with pytest.raises(TypeError, match="unhashable"):
        module(jnp.ones(16))


@pytest.fixture(scope="module")
def stack():
    return er.make_blocks(KEY, 6), er.inputs(jax.random.key(1))


def test_the_stack_has_a_layer_axis_and_one_activation(stack):
    blocks, _ = stack
    assert blocks.up.weight.shape == (6, 64, 16)
    assert blocks.activation is jax.nn.gelu


def test_the_checkpointed_scan_keeps_less_and_gives_the_same_gradient(stack):
    blocks, x = stack
    plain_loss = er.scan_loss(remat=False)
    remat_loss = er.scan_loss(remat=True)
    named_loss = er.scan_loss(remat=True, policy=P.save_only_these_names("up_proj"))
    kept, temp = {}, {}
    for label, f in (("plain", plain_loss), ("remat", remat_loss), ("named", named_loss)):
        g, params = er.on_arrays(f, blocks)
        kept[label] = saved_residuals(g, params, x).nbytes
        temp[label] = compiled_stats(jax.jit(jax.grad(g)), params, x).temp_bytes
    assert kept["remat"] < kept["named"] < kept["plain"]
    assert temp["remat"] < temp["plain"]
    plain = er.array_grads(plain_loss, blocks, x)
    for f in (remat_loss, named_loss):
        assert er.largest_difference(plain, er.array_grads(f, blocks, x)) <= 1e-6


def test_equinox_internal_checkpointed_scan_gives_the_same_gradient(stack):
    blocks, x = stack
    plain = er.array_grads(er.scan_loss(remat=False), blocks, x)
    for checkpoints in (1, 2, 6):
        through = er.array_grads(er.internal_scan_loss(checkpoints), blocks, x)
        assert er.largest_difference(plain, through) <= 1e-6


def test_the_scan_table_orders_the_variants_by_what_they_keep(stack):
    blocks, x = stack
    table = er.scan_table(blocks, x)
    kept = [int(n) for n in table.column("values kept")]
    assert kept[1] < kept[2] < kept[0]
    assert len(table.column("the step")) == len(er.SCAN_VARIANTS)


def test_jax_checkpoint_takes_a_method_whose_non_arrays_are_static_fields(mlp_and_x):
    _, x = mlp_and_x

    class StaticBlock(er.Block):
        activation: object = eqx.field(static=True)

        @jax.checkpoint
        def __call__(self, x):
            return super().__call__(x)

    plain = er.array_grads(er.loss, er.Block(16, 64, key=KEY), x)
    static = er.array_grads(er.loss, StaticBlock(16, 64, key=KEY), x)
    assert er.largest_difference(plain, static) <= 1e-6
