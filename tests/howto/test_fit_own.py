"""examples.howto.fit_own: a reader's own step, plain JAX and Flax NNX, through the one call."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from examples.howto import fit_own

if not hasattr(nnx, "List") or not hasattr(jax, "set_mesh"):
    pytest.skip(
        f"jax {jax.__version__} / this Flax lacks jax.set_mesh or nnx.List, which the page's own "
        "steps use",
        allow_module_level=True,
    )
from examples.tools.plans import NO_REMAT, plan


def nnx_model():
    model = fit_own.Model(depth=3, width=32, rngs=nnx.Rngs(0))
    return nnx.split(model)


def test_the_nnx_step_gives_the_same_gradient_under_every_policy():
    graphdef, state = nnx_model()
    x = jax.random.normal(jax.random.key(1), (8, 32))
    make_step = fit_own.nnx_make_step(graphdef)
    expected = make_step(NO_REMAT)(state, x)
    for policy in fit_own.OWN_POLICIES.values():
        got = make_step(policy)(state, x)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), got, expected)


def test_the_nnx_step_checkpoints_each_block_only_under_a_policy():
    graphdef, state = nnx_model()
    x = jnp.ones((8, 32))
    make_step = fit_own.nnx_make_step(graphdef)
    # a checkpoint equation prints its parameters, prevent_cse among them
    assert "prevent_cse" not in str(jax.make_jaxpr(make_step(NO_REMAT))(state, x))
    text = str(jax.make_jaxpr(make_step(jax.checkpoint_policies.nothing_saveable))(state, x))
    assert text.count("prevent_cse=") == 3  # one per block


def test_the_plain_step_is_the_loss_and_its_gradient():
    w = jax.random.normal(jax.random.key(0), (3, 16, 16)) / 4
    x = jax.random.normal(jax.random.key(1), (4, 16))
    value, grad = fit_own.plain_step(jax.checkpoint_policies.nothing_saveable)(w, x)
    h = np.asarray(x, np.float64)
    for wi in np.asarray(w, np.float64):
        h = np.tanh(h @ wi)
    np.testing.assert_allclose(value, np.mean(h**2), rtol=1e-5)
    plain = jax.grad(lambda w: fit_own.plain_step(NO_REMAT)(w, x)[0])(w)
    # float32, summed in another order with and without remat: relative to the largest entry
    np.testing.assert_allclose(grad, plain, rtol=1e-5, atol=1e-5 * float(np.abs(plain).max()))


def test_one_call_plans_both_steps_on_the_cpu_and_orders_the_policies():
    w = np.zeros((4, 256, 256), np.float32)  # a concrete array: only its shape is used
    x = jax.ShapeDtypeStruct((512, 256), jnp.float32)
    plans = plan(fit_own.plain_step, w, x, targets=["cpu"], policies=fit_own.OWN_POLICIES)
    table = plans.table()
    assert [row[1] for row in table.rows] == list(fit_own.OWN_POLICIES)
    temps = {p.label: p.temp_bytes for p in plans.plans}
    assert (
        temps["nothing_saveable"] <= temps["dots_with_no_batch_dims_saveable"] <= temps["no remat"]
    )

    graphdef, state = nnx_model()
    batch = jax.ShapeDtypeStruct((64, 32), jnp.float32)
    nnx_plans = plan(fit_own.nnx_make_step(graphdef), state, batch, targets=["cpu"],
                     policies=fit_own.OWN_POLICIES)  # fmt: skip
    assert all(p.fits for p in nnx_plans.plans)


def test_the_installed_targets_always_include_the_cpu():
    targets = fit_own.installed_targets()
    assert targets[0] == "cpu"
