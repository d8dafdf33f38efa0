"""examples.tools.compat: the same answers on every JAX release of the matrix (nox -s tests-jax)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from examples.tools import compat
from examples.tools.jaxprs import walk

P = jax.checkpoint_policies


def _chain(w1, w2, x):
    return jnp.sin(w2 @ jnp.sin(w1 @ x))


ARGS = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones(4))


def test_jax_version_is_the_installed_release():
    assert ".".join(map(str, compat.jax_version())) == jax.__version__


def test_a_reduce_precision_is_looked_through_to_its_producer():
    """The rule older releases lacked, on a jaxpr built here (independent of any checkpoint)."""
    finfo = jnp.finfo(jnp.float32)

    def fn(x):
        y = jnp.sin(x)
        return lax.reduce_precision(y, exponent_bits=finfo.nexp, mantissa_bits=finfo.nmant)

    jaxpr = jax.make_jaxpr(fn)(jnp.ones(3)).jaxpr
    assert [e.primitive.name for e in jaxpr.eqns] == ["sin", "reduce_precision"]
    ((aval, words, on_host),) = compat._describe(jaxpr, ["x"])
    assert words.startswith("output of sin from ")
    assert aval.shape == (3,)
    assert not on_host


def test_same_residuals_as_jax_only_the_words_may_differ():
    f = jax.checkpoint(_chain, policy=P.dots_with_no_batch_dims_saveable)
    ours, theirs = compat.saved_residuals(f, *ARGS), compat.jax_saved_residuals(f, *ARGS)
    assert [v.aval for v in ours] == [aval for aval, _ in theirs]
    words = [v.description.split(" from ")[0] for v in ours]
    assert (
        words
        == ["from the argument w1", "from the argument w2", "from the argument x"]
        + ["output of dot_general"] * 2
    )
    assert {d.split(" from ")[0] for _, d in theirs[3:]} <= {
        "output of dot_general",
        "output of reduce_precision",
    }


def test_offloaded_values_are_on_host_and_their_device_puts_say_so():
    policy = P.offload_dot_with_no_batch_dims("device", "pinned_host")
    f = jax.checkpoint(_chain, policy=policy)
    kept = compat.saved_residuals(f, *ARGS)
    assert [v.on_host for v in kept] == [False] * 3 + [True] * 2  # w1, w2, x, then the products
    jaxpr = jax.make_jaxpr(jax.grad(lambda *a: f(*a).sum()))(*ARGS).jaxpr
    puts = [e for e, _ in walk(jaxpr) if e.primitive.name == "device_put"]
    # Two products go to the host on the forward pass; two come back for the backward pass.
    assert sorted(compat.device_put_to_host(e) for e in puts) == [False, False, True, True]
    assert not any(compat.device_put_to_host(e) for e, _ in walk(jaxpr) if e not in puts)


def test_cost_analysis_is_one_dict_with_the_products_flops():
    compiled = jax.jit(lambda a, b: a @ b).lower(jnp.ones((8, 16)), jnp.ones((16, 4))).compile()
    cost = compat.cost_analysis(compiled)
    assert isinstance(cost, dict)
    assert cost["flops"] == pytest.approx(2 * 8 * 16 * 4, rel=0.01)


def test_memory_fields_are_read_or_none():
    compiled = jax.jit(lambda a: a * 2).lower(jnp.ones((8, 16))).compile()
    memory = compiled.memory_analysis()
    assert compat.memory_field(memory, "argument_size_in_bytes") == 8 * 16 * 4
    assert compat.memory_field(memory, "no_such_field_in_any_release") is None


def test_policy_names_are_the_public_policies():
    names = compat.policy_names()
    assert names == sorted(names)
    assert {"dots_saveable", "nothing_saveable", "save_only_these_names"} <= set(names)
    assert all(callable(getattr(P, n)) for n in names)
    assert compat.checkpoint_policy("dots_saveable") is P.dots_saveable


def test_a_missing_policy_is_a_clear_error():
    with pytest.raises(AttributeError, match=rf"jax {jax.__version__} has no .*no_such_policy"):
        compat.checkpoint_policy("no_such_policy")


def test_dropvar_is_the_class_of_dropped_outputs():
    from jax._src import core

    assert compat.DropVar is core.DropVar
    assert not isinstance(jax.make_jaxpr(jnp.sin)(1.0).jaxpr.outvars[0], compat.DropVar)


def test_pallas_kernel_name_from_either_parameter():
    from types import SimpleNamespace

    newer = SimpleNamespace(params={"name": "mha_forward"})
    older = SimpleNamespace(params={"name_and_src_info": SimpleNamespace(name="mha_forward")})
    # jax 0.5.1 to 0.7: the name is only in the kernel jaxpr's debug info.
    debug = SimpleNamespace(func_src_info="mha_forward at /x/attention.py:82")
    between = SimpleNamespace(params={"jaxpr": SimpleNamespace(debug_info=debug)})
    names = {compat.pallas_kernel_name(e) for e in (newer, older, between)}
    assert names == {"mha_forward"}
    nameless = SimpleNamespace(params={"jaxpr": SimpleNamespace(debug_info=None), "grid": ()})
    with pytest.raises(LookupError, match=r"names no kernel; its parameters: \['grid', 'jaxpr'\]"):
        compat.pallas_kernel_name(nameless)


def test_enable_x64_is_a_block_of_64_bit_arrays():
    assert jnp.ones(()).dtype == jnp.float32
    with compat.enable_x64():
        assert jnp.ones(()).dtype == jnp.float64
    assert jnp.ones(()).dtype == jnp.float32


def test_bind_equation_evaluates_every_equation_of_a_jaxpr():
    """Including a custom_jvp call (jax.nn.relu), whose bind takes its functions first on older
    releases; the result is the function's own."""

    def f(x):
        return jnp.sum(jax.nn.relu(jnp.sin(x) * 2.0))

    x = jnp.linspace(-2.0, 2.0, 7)
    closed = jax.make_jaxpr(f)(x)
    env = dict(zip(closed.jaxpr.invars, [x], strict=True))
    for eqn in closed.jaxpr.eqns:
        invals = [v.val if hasattr(v, "val") else env[v] for v in eqn.invars]
        outs = compat.bind_equation(eqn, invals)
        outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outvars, outs, strict=True))
    assert jnp.allclose(env[closed.jaxpr.outvars[0]], f(x), rtol=1e-6)


def test_variable_value_reads_an_nnx_state_leaf():
    """The kernel and bias read from the layer's state are the ones the layer computes with."""
    from flax import nnx

    layer = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    state = nnx.state(layer)
    kernel, bias = (compat.variable_value(state[name]) for name in ("kernel", "bias"))
    x = jnp.arange(4.0).reshape(2, 2)
    assert kernel.shape == (2, 3)
    assert jnp.allclose(layer(x), x @ kernel + bias, rtol=1e-6)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="names a pass of XLA's CPU pipeline")
def test_compile_with_options_switches_a_pass_off_for_one_compilation():
    def f(a):
        return jnp.sum(lax.optimization_barrier(a) @ a)

    x = jnp.ones((8, 8))

    def barriers(compiled):
        return compiled.as_text().count("opt-barrier(")

    default = barriers(jax.jit(f).lower(x).compile())
    kept = compat.compile_with_options(
        jax.jit(f).lower(x), {"xla_disable_hlo_passes": "cse_barrier_expander"}
    )
    assert barriers(kept) == 1  # the pass that removes barriers did not run
    assert default == 0  # it does by default...
    assert barriers(jax.jit(f).lower(x).compile()) == default  # ...and still does afterwards
    assert float(kept(x)) == float(jax.jit(f)(x))
