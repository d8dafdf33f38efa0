"""examples.howto.scan_transformer and examples.howto.transformer: the first how-to guide.

Gradients of every setup against a float64 reference without remat, the named block against the
shared one and NumPy, and each claim the page makes about memory, FLOPs, barriers and unroll.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import explorer
from examples.howto import scan_transformer as st
from examples.tools import compat, models
from examples.tools.jaxprs import traced_remat_sites
from examples.tools.models import Config, block, init_inputs, init_params
from examples.tools.residuals import saved_residuals

#: Small enough to compile quickly, large enough that the page's orderings hold.
SMALL = Config(layers=4, batch=2, seq=64, width=64, heads=2)
TINY = Config(layers=3, batch=2, seq=16, width=32, heads=2)


def test_named_block_is_the_shared_block_with_either_attention():
    params, x = init_params(TINY), init_inputs(TINY)
    one = jax.tree.map(lambda w: w[0], params)
    reference = block(x, one, TINY.heads)
    for attention in ("einsum", "dot_product_attention"):
        np.testing.assert_allclose(
            models.named_block(x, one, TINY.heads, attention), reference, rtol=1e-5, atol=1e-5
        )


def test_named_block_rejects_an_unknown_attention():
    params, x = init_params(TINY), init_inputs(TINY)
    one = jax.tree.map(lambda w: w[0], params)
    with pytest.raises(ValueError, match="attention must be 'einsum' or 'dot_product_attention'"):
        models.named_block(x, one, TINY.heads, attention="flash")


def test_loss_matches_numpy_float64():
    params, _, x, y = st.init_state(TINY)
    # With a zero target the loss is the mean square of the output: explorer's NumPy reference.
    zero = jnp.zeros_like(y)
    for setup in (st.NO_REMAT, st.BY_LABEL["nothing_saveable"]):
        value = st.loss_fn(TINY, setup)(params, x, zero)
        np.testing.assert_allclose(value, explorer.loss_float64(TINY, params, x), rtol=1e-5)


def _on_the_cpu():
    """Where the float64 programs run: the CPU. XLA:GPU (jax 0.11.2, on an H200) refused this
    model's float64 products ("GEMM is not supported by cublasLt and legacy cublas fallback is
    removed"); a float64 reference needs no GPU."""
    return jax.default_device(jax.devices("cpu")[0])


def _float64_gradient(cfg: Config):
    params, _, x, y = st.init_state(cfg)
    with compat.enable_x64(True), _on_the_cpu():
        as64 = lambda t: jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), t)
        grads = jax.grad(st.loss_fn(cfg, st.NO_REMAT))(as64(params), as64(x), as64(y))
        return jax.tree.map(np.asarray, grads)


@pytest.mark.parametrize(
    "setup",
    # the first setup in the quick run, every one with `--all` (CI)
    [pytest.param(s, marks=() if i == 0 else pytest.mark.slow) for i, s in enumerate(st.SETUPS)],
    ids=lambda s: s.label,
)
def test_every_setup_has_the_float64_gradient(setup):
    params, _, x, y = st.init_state(TINY)
    reference = _float64_gradient(TINY)
    grads = jax.jit(jax.grad(st.loss_fn(TINY, setup)))(params, x, y)
    for key, ref in reference.items():
        scale = np.max(np.abs(ref))
        np.testing.assert_allclose(np.asarray(grads[key]) / scale, ref / scale, atol=1e-5)


def test_train_step_with_remat_makes_the_same_update():
    state = st.init_state(TINY)
    plain = jax.jit(st.step_fn(TINY, st.NO_REMAT))(*state)
    remat = jax.jit(st.step_fn(TINY, st.BY_LABEL["nothing_saveable"]))(*state)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(remat), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # The step did update the weights.
    assert not np.allclose(plain[0]["w1"], state[0]["w1"])


def test_setup_labels_are_unique_and_say_prevent_cse_true_only_where_it_is():
    labels = [s.label for s in st.SETUPS]
    assert len(labels) == len(set(labels))
    for s in st.SETUPS:
        if s.where == "scanned block":
            assert ("prevent_cse=True" in s.label) == s.prevent_cse


@pytest.fixture(scope="module")
def measured():
    return st.measure(st.SETUPS, SMALL, timed=False)


@pytest.mark.slow
def test_whole_loss_checkpoint_saves_nothing_and_adds_work(measured):
    none, whole = measured["no remat"].stats, measured["checkpoint the whole loss"].stats
    # The backward pass recomputes the whole forward pass with every residual: the temporaries
    # stay those of no remat, give or take how XLA schedules a few buffers (on jax 0.5 about 1%
    # below). The block checkpoint, for comparison, takes more than half of them away.
    assert whole.temp_bytes >= 0.98 * none.temp_bytes
    if compat.jax_version() >= (0, 10):  # the releases the page is built on: none saved at all
        assert whole.temp_bytes >= none.temp_bytes
    assert whole.flops > none.flops


@pytest.mark.slow
def test_block_checkpoint_saves_memory_for_more_flops(measured):
    none, block_ = measured["no remat"].stats, measured["nothing_saveable"].stats
    assert block_.temp_bytes < none.temp_bytes / 2
    assert block_.flops > none.flops


@pytest.mark.slow
def test_names_policy_keeps_the_two_names_and_spares_recompute(measured):
    params, x = init_params(SMALL), init_inputs(SMALL)
    one = jax.tree.map(lambda w: w[0], params)
    layer = st.layer_fn(SMALL, st.BY_LABEL['save_only_these_names("qkv", "mlp_pre")'])
    kept = saved_residuals(layer, x, one).excluding_arguments()
    assert [r.name for r in kept] == ["qkv", "mlp_pre"]
    nothing, names, none = (
        measured[k].stats
        for k in ("nothing_saveable", 'save_only_these_names("qkv", "mlp_pre")', "no remat")
    )
    assert nothing.temp_bytes < names.temp_bytes < none.temp_bytes
    assert none.flops < names.flops < nothing.flops


def test_the_dots_policy_keeps_three_weight_products_not_the_last_mlp_one():
    # The page: the policy lets JAX keep any product with the weights; JAX keeps those the
    # backward pass reads, which leaves out the last MLP product's output.
    params, x = init_params(SMALL), init_inputs(SMALL)
    one = jax.tree.map(lambda w: w[0], params)
    layer = st.layer_fn(SMALL, st.BY_LABEL["dots_with_no_batch_dims_saveable"])
    kept = saved_residuals(layer, x, one).excluding_arguments()
    shapes = sorted(r.shape[-1] for r in kept)
    assert all(r.detail == "dot_general" for r in kept), kept
    # q, k and v in one product (3 x width), the output projection (width), the first MLP
    # product (4 x width); not the second MLP product, whose output (width) is the block's.
    assert shapes == sorted([3 * SMALL.width, SMALL.width, 4 * SMALL.width]), kept


def test_names_policy_still_recomputes_attention_and_output_projection():
    """Products in the backward checkpoint: keeping qkv and mlp_pre removes the two products
    that make them; the dots policy also keeps the output projection's; the rest (attention)
    is recomputed under both."""
    params, _, x, y = st.init_state(TINY)

    def products(label):
        grad = jax.grad(st.loss_fn(TINY, st.BY_LABEL[label]))
        return sum(site.products for site in traced_remat_sites(grad, params, x, y))

    nothing = products("nothing_saveable")
    names = products('save_only_these_names("qkv", "mlp_pre")')
    dots = products("dots_with_no_batch_dims_saveable")
    assert nothing - names == 2
    assert names - dots == 1


@pytest.mark.slow
def test_prevent_cse_adds_a_barrier_and_changes_nothing_under_scan(measured):
    on, off = st.BY_LABEL["nothing_saveable, prevent_cse=True"], st.BY_LABEL["nothing_saveable"]
    assert st.optimization_barriers(on, TINY) >= 1
    assert st.optimization_barriers(off, TINY) == 0
    a, b = measured[on.label].stats, measured[off.label].stats
    assert (a.temp_bytes, a.flops) == (b.temp_bytes, b.flops)


@pytest.mark.slow
def test_unroll_raises_memory_and_xla_counts_a_loop_body_once(measured):
    u1, u2 = measured["nothing_saveable"].stats, measured["nothing_saveable, unroll=2"].stats
    assert u2.temp_bytes > u1.temp_bytes
    # Two layers per iteration, the same work in all: XLA's count doubles all the same.
    assert 1.8 < u2.flops / u1.flops < 2.2
    assert measured["nothing_saveable, unroll=True"].stats.temp_bytes > u2.temp_bytes


@pytest.mark.slow
def test_barrier_keeps_at_least_as_much_saving_once_unrolled(measured):
    # Unrolled, the layers' recomputations share one loop body (or, at unroll=True, one
    # program with the forward pass): only the barrier separates them. Whether XLA still
    # honours it when it schedules is the release's (jax 0.10.2: the same memory either way;
    # jax 0.12: less with it); on no release does the barrier cost memory here.
    for unroll in ("2", "True"):
        off = measured[f"nothing_saveable, unroll={unroll}"].stats.temp_bytes
        on = measured[f"nothing_saveable, unroll={unroll}, prevent_cse=True"].stats.temp_bytes
        assert on <= off


@pytest.mark.parametrize(
    ("without", "with_barrier", "no_remat", "says"),
    [
        (7, 4, 10, "lost part of the saving"),
        (11, 4, 10, "lost the whole saving"),  # more than no remat at all
        (10, 4, 10, "lost the whole saving"),
        (7, 7, 10, "made no difference"),
        (4, 7, 10, "cost memory"),
    ],
)
def test_barrier_verdict_tells_part_of_the_saving_from_all_of_it(
    without, with_barrier, no_remat, says
):
    # Without the barrier at or above no remat's temporaries, nothing of the saving is left.
    verdict = st.barrier_verdict(without, with_barrier, no_remat)
    assert says in verdict
    assert sum(p in verdict for p in ("part of", "whole", "no difference", "cost")) == 1


@pytest.mark.slow
def test_table_refuses_an_unknown_label_and_shows_times_only_when_timed(measured):
    table = st.table(measured, ["no remat", "nothing_saveable"], "no remat")
    assert "step time" not in table.header
    with pytest.raises(KeyError):
        st.table(measured, ["no such setup"], "no remat")
    timed = st.measure([st.NO_REMAT], TINY, timed=True)
    assert st.table(timed, ["no remat"], "no remat").column("step time")[0].endswith(")")


def test_normalized_hlo_drops_numbering_and_locations_only():
    a = '%fusion.12 = f32[2]{0} fusion(%p.3), kind=kLoop, metadata={op_name="a" source_line=1}'
    b = '%fusion.7 = f32[2]{0} fusion(%p.1), kind=kLoop, metadata={op_name="b" source_line=9}'
    c = "%fusion.7 = f32[4]{0} fusion(%p.1), kind=kLoop"
    expected = "%fusion = f32[2]{0} fusion(%p), kind=kLoop"
    assert st.normalized_hlo(a) == st.normalized_hlo(b) == expected
    assert st.normalized_hlo(a) != st.normalized_hlo(c)


@pytest.mark.slow
def test_compare_programs_sees_the_barrier_and_a_program_equals_itself():
    on, off = st.BY_LABEL["nothing_saveable, prevent_cse=True"], st.BY_LABEL["nothing_saveable"]
    programs = st.compare_programs(on, off, TINY)
    assert programs.barriers_lowered[0] >= 1
    assert programs.barriers_lowered[1] == 0
    assert programs.barriers_compiled[1] == 0
    assert programs.barriers_compiled[0] <= programs.barriers_lowered[0]
    assert st.compare_programs(off, off, TINY).same_program
    unrolled = st.compare_programs(off, st.BY_LABEL["nothing_saveable, unroll=2"], TINY)
    assert not unrolled.same_program


def test_time_interleaved_times_every_setup_the_same_number_of_times():
    setups = [st.NO_REMAT, st.BY_LABEL["nothing_saveable"]]
    times = st.time_interleaved(setups, TINY)
    assert list(times) == [s.label for s in setups]
    for t in times.values():
        assert t.repeats == st.MIN_REPEATS
        assert t.min_s <= t.median_s <= t.max_s
    with pytest.raises(ValueError, match="at least"):
        st.time_interleaved(setups, TINY, repeats=2)


def test_donating_params_and_optimizer_state_writes_them_in_place():
    setup = st.BY_LABEL["nothing_saveable"]
    kept, donated = st.buffers(setup, TINY), st.buffers(setup, TINY, donate=True)
    params, opt_state, _, _ = st.init_state(TINY)
    state_bytes = sum(a.nbytes for a in jax.tree.leaves((params, opt_state)))
    assert kept.aliased == 0
    # Everything donated comes back in place (Adam's step count included), the loss does not.
    assert state_bytes - 64 <= donated.aliased <= state_bytes
    assert (donated.arguments, donated.outputs) == (kept.arguments, kept.outputs)
    d = donated
    assert d.held == d.arguments + d.outputs - d.aliased + d.temporaries
    table = st.buffers_table({"a": kept, "b": donated})
    assert table.header[3] == "aliased (alias_size)"


# --- step 6: dropout keys, a static flag, and the gradient check ---------------------------------


def _dropout_layers(rate=0.5):
    layer = functools.partial(st.dropout_block, heads=TINY.heads, rate=rate)
    remat = jax.checkpoint(
        layer, policy=jax.checkpoint_policies.nothing_saveable, prevent_cse=False,
        static_argnums=(3,),
    )  # fmt: skip
    return layer, remat


def test_dropout_gradients_with_and_without_the_checkpoint_agree_in_float64():
    params, _, x, y = st.init_state(TINY)
    with compat.enable_x64(True), _on_the_cpu():
        key = jax.random.key(3)
        as64 = lambda t: jax.tree.map(lambda a: jnp.asarray(np.asarray(a), jnp.float64), t)
        params, x, y = as64(params), as64(x), as64(y)
        layer, remat = _dropout_layers()
        plain = jax.value_and_grad(st.make_dropout_loss(layer))(params, x, y, key)
        checked = jax.value_and_grad(st.make_dropout_loss(remat))(params, x, y, key)
        scale = max(float(np.max(np.abs(g))) for g in jax.tree.leaves(plain[1]))
        assert st.largest_difference(plain[1], checked[1]) <= 1e-12 * scale
        assert abs(float(plain[0]) - float(checked[0])) <= 1e-12 * abs(float(plain[0]))
        # Dropout is on: without it the loss is another one.
        off = st.make_dropout_loss(layer, train=False)(params, x, y, key)
        assert float(off) != float(plain[0])


def test_each_layer_draws_its_own_mask_and_the_float32_check_agrees():
    params, _, x, y = st.init_state(TINY)
    layer, remat = _dropout_layers()
    one = jax.tree.map(lambda w: w[0], params)
    k0, k1 = jax.random.split(jax.random.key(3))
    assert not np.array_equal(layer(x, one, k0, True), layer(x, one, k1, True))
    key = jax.random.key(42)
    plain = jax.jit(jax.value_and_grad(st.make_dropout_loss(layer)))(params, x, y, key)
    checked = jax.jit(jax.value_and_grad(st.make_dropout_loss(remat)))(params, x, y, key)
    scale = max(float(np.max(np.abs(g))) for g in jax.tree.leaves(plain[1]))
    assert st.largest_difference(plain[1], checked[1]) <= 1e-5 * scale


def test_a_traced_train_flag_needs_static_argnums():
    params, _, x, y = st.init_state(TINY)
    layer = functools.partial(st.dropout_block, heads=TINY.heads, rate=0.5)
    traced = jax.checkpoint(layer, prevent_cse=False)
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.grad(st.make_dropout_loss(traced))(params, x, y, jax.random.key(0))


def test_prevent_cse_takes_a_pytree_prefix_where_the_docstring_says_so():
    documented = "pytree prefix" in (jax.checkpoint.__doc__ or "")
    version = compat.jax_version()
    if version >= (0, 12):
        assert documented
        f = jax.checkpoint(lambda a, b: jnp.sin(a) * jnp.cos(b), prevent_cse=(True, False))
        g = jax.grad(lambda a, b: f(a, b).sum())(jnp.ones(3), jnp.ones(3))
        np.testing.assert_allclose(g, np.cos(1.0) * np.cos(1.0), rtol=1e-6)
    elif version <= (0, 10, 2):
        assert not documented  # the page: a plain bool there
