"""examples.tools.jaxprs: the walker, and the checkpoint found under both remat implementations."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.tools import jaxprs

P = jax.checkpoint_policies
DOTS = P.dots_with_no_batch_dims_saveable


def _two_products(w, x):
    return jnp.sum(jnp.sin(w @ jnp.sin(w @ x)))


def _args():
    return jnp.ones((4, 4)), jnp.ones(4)


def test_walk_counts_nested_equations():
    closed = jax.make_jaxpr(jax.jit(lambda w, x: jax.checkpoint(_two_products)(w, x)))(*_args())
    counts = jaxprs.primitive_counts(closed)
    assert counts["dot_general"] == 2
    assert counts["sin"] == 2
    depths = {eqn.primitive.name: d for eqn, d in jaxprs.walk(closed)}
    assert depths["dot_general"] == 2  # inside the jit, inside the checkpoint


def test_remat_site_carries_the_policy_under_either_implementation(remat3):
    sites = jaxprs.traced_remat_sites(jax.checkpoint(_two_products, policy=DOTS), *_args())
    assert len(sites) == 1
    (site,) = sites
    assert site.policy == DOTS
    assert site.products == 2
    assert site.depth == 0
    assert site.primitive == jaxprs.remat_primitive_name()
    assert site.primitive == ("call_hi_primitive" if remat3 else "remat2")


def test_nested_checkpoints_and_no_policy(remat3):
    inner = jax.checkpoint(lambda w, x: jnp.sin(w @ x))
    outer = jax.checkpoint(lambda w, x: jnp.sum(inner(w, inner(w, x))))
    sites = jaxprs.traced_remat_sites(outer, *_args())
    assert [s.depth for s in sites] == [0, 1, 1]
    assert all(s.policy is None for s in sites)
    assert jaxprs.traced_remat_sites(_two_products, *_args()) == []


@pytest.mark.skipif(not jaxprs.remat3_available(), reason="this JAX has no jax_remat3 flag")
def test_remat3_context_restores_the_flag():
    before = jaxprs.remat3_enabled()
    with jaxprs.remat3(not before):
        assert jaxprs.remat3_enabled() is (not before)
    assert jaxprs.remat3_enabled() is before
    with pytest.raises(KeyError), jaxprs.remat3(True):
        raise KeyError("inside")
    assert jaxprs.remat3_enabled() is before


@pytest.mark.parametrize("mode", ["remat2", "remat3"])
def test_jit_inlined_looks_inside_a_jit_that_a_checkpoint_wraps(mode):
    if mode == "remat3" and not jaxprs.remat3_available():
        pytest.skip("this JAX has no jax_remat3")
    from examples.tools.residuals import saved_residuals

    dots = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    f = jax.checkpoint(jax.jit(lambda w, x: jnp.sum(jnp.sin(x @ w) @ w)), policy=dots)
    w, x = jnp.ones((3, 3)), jnp.ones((2, 3))
    with jaxprs.remat3(True) if mode == "remat3" else contextlib.nullcontext():
        inlined = jaxprs.jit_inlined(f, w, x)
        before = saved_residuals(f, w, x).excluding_arguments()
        after = saved_residuals(inlined, w, x).excluding_arguments()
        np.testing.assert_array_equal(jax.grad(inlined)(w, x), jax.grad(f)(w, x))
    assert all(r.detail != "dot_general" for r in before)  # the jitted function's outputs
    # Inside it, the policy keeps the first product, which sin's derivative reads (the second
    # product's output is read by nothing).
    assert [(r.detail, r.shape) for r in after] == [("dot_general", (2, 3))], after


def test_config_value_sets_an_option_in_its_block_and_restores_it_on_any_exit():
    from examples.tools.jaxprs import config_value

    before = jax.config.jax_enable_checks
    with config_value("jax_enable_checks", not before):
        assert jax.config.jax_enable_checks is (not before)
    assert jax.config.jax_enable_checks is before
    with pytest.raises(KeyError), config_value("jax_enable_checks", not before):
        raise KeyError("inside")
    assert jax.config.jax_enable_checks is before
