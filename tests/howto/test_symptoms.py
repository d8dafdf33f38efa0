"""examples.howto.symptoms: the claims of the guide "When remat goes wrong", on the installed JAX.

The page measures the site's transformer at ``symptoms.CONFIG``; these tests use a smaller one
with the same proportions (attention logits twice the MLP activations per layer), so that each
qualitative claim the page makes is checked on every run.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.howto import symptoms
from examples.tools import jaxprs
from examples.tools.compat import jax_version
from examples.tools.measure import Timing
from examples.tools.models import Config

CFG = Config(layers=2, batch=1, seq=64, width=32, heads=4)


def _logits_and_hidden(cfg: Config) -> tuple[int, int]:
    return cfg.batch * cfg.heads * cfg.seq**2, cfg.batch * cfg.seq * cfg.mlp_ratio * cfg.width


def test_the_test_model_has_the_page_models_proportions():
    page, here = _logits_and_hidden(symptoms.CONFIG), _logits_and_hidden(CFG)
    assert page[0] / page[1] == here[0] / here[1] == 2


@pytest.fixture(scope="module")
def rows():  # compiles every variant once for the module
    return symptoms.by_name(symptoms.measure(list(symptoms.variants(CFG)), CFG))


@pytest.mark.slow
def test_every_variant_computes_the_gradient_without_remat():
    differences = symptoms.gradient_differences(list(symptoms.variants(CFG)), CFG)
    assert set(differences) == set(symptoms.variants(CFG))
    assert max(differences.values()) < 1e-5


@pytest.mark.slow
def test_the_whole_loss_checkpoint_keeps_nothing_and_saves_no_compiled_memory(rows):
    whole, none, nothing = (
        rows[k] for k in ("whole loss checkpointed", "no checkpoint", "block, nothing_saveable")
    )
    assert whole.kept_bytes == 0
    assert whole.temp_bytes >= 0.95 * none.temp_bytes
    assert nothing.temp_bytes < 0.5 * none.temp_bytes


@pytest.mark.slow
def test_everything_saveable_keeps_what_no_checkpoint_keeps(rows):
    every, none = rows["block, everything_saveable"], rows["no checkpoint"]
    free = rows[symptoms.EVERYTHING_NO_BARRIER]
    # By JAX's account it keeps exactly what no checkpoint keeps ...
    assert every.kept_bytes == free.kept_bytes == none.kept_bytes
    # ... and XLA saves nothing for it: without the barrier the step compiles to the memory of no
    # checkpoint; with it (the default prevent_cse=True), to at least as much (jax 0.12's XLA
    # gives it more temporaries, jax 0.10's the same).
    assert free.temp_bytes == pytest.approx(none.temp_bytes, rel=0.05)
    assert every.temp_bytes >= 0.95 * none.temp_bytes


def test_the_difference_is_the_barrier_prevent_cse_adds():
    params, x = symptoms.inputs(CFG)
    losses = symptoms.variants(CFG)
    assert symptoms.barriers(losses["block, everything_saveable"], params, x) > 0
    assert symptoms.barriers(losses[symptoms.EVERYTHING_NO_BARRIER], params, x) == 0
    assert symptoms.barriers(losses["no checkpoint"], params, x) == 0


@pytest.mark.slow
def test_saving_the_logits_keeps_more_than_saving_the_mlp_activations(rows):
    logits = rows["block, save_only_these_names('attn_logits')"]
    hidden = rows["block, save_only_these_names('mlp_hidden')"]
    nothing = rows["block, nothing_saveable"]
    assert logits.kept_bytes > hidden.kept_bytes > nothing.kept_bytes


@pytest.mark.slow
def test_saving_the_gelu_output_costs_memory_and_spares_no_flops(rows):
    # The page: mlp_hidden (the GELU's output) keeps more than nothing_saveable for the same
    # compiled FLOPs (within 1%), since the GELU's derivative reads its input, recomputed anyway.
    hidden = rows["block, save_only_these_names('mlp_hidden')"]
    nothing = rows["block, nothing_saveable"]
    assert hidden.kept_bytes > nothing.kept_bytes
    assert hidden.flops == pytest.approx(nothing.flops, rel=0.01)


@pytest.mark.slow
def test_a_misspelt_name_compiles_to_the_nothing_saveable_step(rows):
    typo, nothing = (
        rows["block, save_only_these_names('mlp_hiden')"],
        rows["block, nothing_saveable"],
    )
    assert (typo.kept_bytes, typo.temp_bytes) == (nothing.kept_bytes, nothing.temp_bytes)


@pytest.mark.slow
def test_flops_rise_in_the_order_the_page_gives(rows):
    flops = {k: rows[k].flops for k in rows}
    assert (
        flops["no checkpoint"]
        < flops["block, dots_with_no_batch_dims_saveable"]
        < flops["block, nothing_saveable"]
        < flops["whole loss checkpointed"]
    )


@pytest.mark.slow
def test_the_table_marks_untimed_rows_and_relative_flops(rows):
    timing = Timing(1e-3, 9e-4, 2e-3, 7)
    listed = list(rows.values())
    listed[0] = symptoms.Row(**{**listed[0].__dict__, "timing": timing})
    table = symptoms.table(listed)
    assert table.column("FLOPs")[0] == "1.00×"
    assert "not timed" in table.column("step time (CPU)")
    assert "FLOPs" in symptoms.table(list(rows.values())).header


def test_unknown_variant_names_are_refused():
    with pytest.raises(KeyError, match="no variant named"):
        symptoms.measure(["block, nothing"], CFG)


def test_relation_and_time_verdict_words():
    assert symptoms.relation(2.0, 2.0) == "the same as"
    assert symptoms.relation(3.0, 2.0) == "1.50× as much as"
    fast, slow = Timing(1.0, 0.9, 1.1, 7), Timing(2.0, 1.9, 2.1, 7)
    assert symptoms.time_verdict(fast, slow) == "faster than"
    assert symptoms.time_verdict(slow, fast) == "slower than"
    assert symptoms.time_verdict(fast, Timing(1.05, 1.0, 1.2, 7)) == "within the noise of"


# --- static arguments ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def layer_args():
    params, x = symptoms.inputs(CFG)
    return jax.tree.map(lambda w: w[0], params), x


def _loss(body, **kwargs):
    return lambda w, x: jnp.mean(body(x, w, **kwargs) ** 2)


def test_a_traced_flag_raises_tracer_bool_conversion_naming_the_argument(layer_args):
    def step(w, x, train):
        return jnp.mean(jax.checkpoint(symptoms.scaled_block)(x, w, train) ** 2)

    with pytest.raises(jax.errors.TracerBoolConversionError, match="argument train"):
        jax.grad(step)(*layer_args, True)


def test_static_argnums_fixes_it_and_the_gradient_is_the_plain_one(layer_args):
    body = jax.checkpoint(symptoms.scaled_block, static_argnums=(2,))
    got = jax.jit(jax.grad(lambda w, x: jnp.mean(body(x, w, True) ** 2)))(*layer_args)
    plain = jax.grad(lambda w, x: jnp.mean(symptoms.scaled_block(x, w, True) ** 2))
    want = jax.jit(plain)(*layer_args)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-7)


def test_a_static_argument_passed_by_keyword_is_refused(layer_args):
    body = jax.checkpoint(symptoms.scaled_block, static_argnums=(2,))
    with pytest.raises(ValueError, match=r"static_argnums.*len\(args\)"):
        jax.grad(_loss(body, train=True))(*layer_args)


def test_static_argnames_is_ignored_on_the_default_implementation(layer_args):
    if "static_argnames" not in inspect.signature(jax.checkpoint).parameters:
        # Releases before 0.10 have no such keyword: the call itself is refused.
        with pytest.raises(TypeError, match="static_argnames"):
            jax.checkpoint(symptoms.scaled_block, static_argnames=("train",))
        return
    body = jax.checkpoint(symptoms.scaled_block, static_argnames=("train",))
    with pytest.raises(jax.errors.TracerBoolConversionError):
        jax.grad(_loss(body, train=True))(*layer_args)


@pytest.mark.skipif(
    not jaxprs.remat3_available(), reason=f"jax {jax.__version__} lacks the jax_remat3 flag"
)
def test_static_argnames_works_under_remat3(layer_args):
    with jaxprs.remat3():
        body = jax.checkpoint(symptoms.scaled_block, static_argnames=("train",))
        grads = jax.grad(_loss(body, train=True))(*layer_args)
    assert grads["wo"].shape == layer_args[0]["wo"].shape


def test_a_traced_length_raises_concretization_and_static_argnums_fixes_it(layer_args):
    x = layer_args[1]
    scaled = jax.checkpoint(symptoms.position_scaled)
    with pytest.raises(jax.errors.ConcretizationTypeError, match=r"jnp\.arange argument 'stop'"):
        jax.grad(lambda x: jnp.sum(scaled(x[0], CFG.seq)))(x)
    fixed = jax.checkpoint(symptoms.position_scaled, static_argnums=(1,))
    got = jax.grad(lambda x: jnp.sum(fixed(x[0], CFG.seq)))(x)
    want = np.zeros(x.shape, np.float32)
    want[0] = (np.arange(CFG.seq) / CFG.seq)[:, None]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_an_unrolled_scan_without_prevent_cse_loses_its_remat():
    """The page's unrolled-checkpointed-scan table. Rolled, the two settings of prevent_cse
    compile alike; unrolled, prevent_cse=False never needs less. Exact on the two releases
    measured: jax 0.12 merges the recompute away (as much as no checkpoint), jax 0.5.0 does not
    (both settings within 1% of each other)."""
    cfg = symptoms.CONFIG
    temps = symptoms.measure_unrolled(cfg, unrolls=(1, cfg.layers))
    rolled, unrolled = temps[1], temps[cfg.layers]
    cse, no_cse = "nothing_saveable", "nothing_saveable, prevent_cse=False"
    assert rolled[cse] == rolled[no_cse] < rolled["no checkpoint"]
    assert unrolled[no_cse] >= 0.99 * unrolled[cse]
    version = jax_version()
    if version >= (0, 12):
        assert unrolled[no_cse] == unrolled["no checkpoint"]
        assert unrolled[cse] < unrolled["no checkpoint"] / 2
    elif version < (0, 5, 1):
        assert unrolled[no_cse] == pytest.approx(unrolled[cse], rel=0.01)
        assert unrolled[cse] > rolled[cse]


def test_an_unrolled_checkpointed_scan_gives_the_plain_gradient():
    cfg = Config(layers=2, batch=1, seq=8, width=16, heads=2)
    params, x = symptoms.inputs(cfg)
    plain = jax.grad(symptoms.unrolled_loss(cfg, 1))(params, x)
    for kw in symptoms.UNROLLED.values():
        got = jax.grad(symptoms.unrolled_loss(cfg, cfg.layers, **kw))(params, x)
        for k in plain:
            np.testing.assert_allclose(got[k], plain[k], rtol=1e-5, atol=1e-7)
