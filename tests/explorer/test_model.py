"""examples.explorer.model: what each policy keeps; one loss and gradient under every policy."""

from __future__ import annotations

import collections

import jax
import numpy as np
import pytest
from explorer._helpers import TINY
from jax.ad_checkpoint import checkpoint_name

from examples import explorer as e
from examples.reference import policies
from examples.tools.models import SIZES, Config, init_inputs, init_params
from examples.tools.residuals import saved_residuals

P = jax.checkpoint_policies


def test_aliases_have_one_computed_source():
    assert e.ALIASES is policies.ALIASES
    for alias, same in e.ALIASES.items():
        assert getattr(P, alias) is getattr(P, same)


def test_every_policy_of_the_installed_jax_is_measured_or_an_alias():
    measured = {label.split("(")[0] for label in e.POLICIES}
    for name in (n for n in dir(P) if not n.startswith("_")):
        if isinstance(getattr(P, name), type):
            continue  # the classes behind the factories, exported since jax 0.11: no new policy
        if name in e.ALIASES:
            assert getattr(P, name) is getattr(P, e.ALIASES[name])
        else:
            assert name in measured, f"jax.checkpoint_policies.{name} is not measured"


def _kept_per_layer(cfg, policy):
    params, x = init_params(cfg), init_inputs(cfg)
    layer = e.layer_fn(cfg, policy)
    one = {k: v[0] for k, v in params.items()}
    return saved_residuals(layer, x, one).excluding_arguments()


def test_no_remat_keeps_most_and_nothing_saveable_least(results):
    kept = {name: _kept_per_layer(TINY, policy).nbytes for name, policy in e.POLICIES.items()}
    # measure() reports the same figure.
    for name, r in results.items():
        assert r.residual_bytes_per_layer == kept[name]
    assert kept[e.NO_REMAT] == max(kept.values())
    assert kept["nothing_saveable"] == min(kept.values()) == 0
    # The attention einsums have batch dimensions: only dots_saveable keeps them.
    assert kept["dots_saveable"] > kept["dots_with_no_batch_dims_saveable"] > 0
    both = kept["save_from_both_policies(no-batch dots, mlp_hidden)"]
    assert (
        both == kept["dots_with_no_batch_dims_saveable"] + kept["save_only_these_names(mlp_hidden)"]
    )


def test_dots_policies_differ_exactly_by_the_batched_attention_products():
    cfg = Config(layers=1, batch=2, seq=8, width=24, heads=2)  # seq differs from head_dim
    params, x = init_params(cfg), init_inputs(cfg)
    one = {k: v[0] for k, v in params.items()}

    def kept(policy):
        return saved_residuals(e.layer_fn(cfg, policy), x, one).excluding_arguments()

    dots, no_batch = kept(P.dots_saveable), kept(P.dots_with_no_batch_dims_saveable)
    extra = [r for r in dots if r not in no_batch]
    assert all(r in dots for r in no_batch)
    assert all(r.primitive == "dot_general" for r in extra)
    # The two attention einsums: dot_general puts their batch dimensions (batch, heads) first.
    # q·kᵀ is (b, h, q, k); weights·v holds b·q·width values, in whichever order of (q, head_dim)
    # einsum picked.
    b, s, h = cfg.batch, cfg.seq, cfg.heads
    assert sorted(r.shape[:2] for r in extra) == [(b, h), (b, h)]
    assert sorted(r.nbytes // 4 for r in extra) == sorted([b * h * s * s, b * s * cfg.width])


def test_save_only_these_names_keeps_exactly_the_named_value():
    params, x = init_params(TINY), init_inputs(TINY)
    layer = e.layer_fn(TINY, e.POLICIES["save_only_these_names(mlp_hidden)"])
    kept = saved_residuals(layer, x, {k: v[0] for k, v in params.items()}).excluding_arguments()
    assert [r.name for r in kept] == ["mlp_hidden"]
    assert kept[0].shape == (TINY.batch, TINY.seq, TINY.mlp_ratio * TINY.width)


@pytest.mark.slow
def test_loss_matches_float64_and_gradients_agree_across_policies():
    params, x = init_params(TINY), init_inputs(TINY)
    with jax.default_matmul_precision("highest"):
        value = e.make_loss(TINY, None)(params, x)
        np.testing.assert_allclose(value, e.loss_float64(TINY, params, x), rtol=1e-5)
        reference = jax.grad(e.make_loss(TINY, None))(params, x)
        # One compiled program per policy: putting every policy in one program made XLA:GPU
        # fail with an internal layout error around the offloaded loop carries (jax 0.11.2).
        every = {
            n: jax.jit(jax.grad(e.make_loss(TINY, pol)))(params, x) for n, pol in e.POLICIES.items()
        }
        for name, grads in every.items():
            for key in reference:
                np.testing.assert_allclose(
                    grads[key], reference[key], rtol=1e-4, atol=1e-6, err_msg=name
                )
    # The gradient against NumPy float64: a central difference of loss_float64 along a random
    # direction equals the directional derivative <grad, direction>.
    rng = np.random.default_rng(0)
    direction = {k: rng.standard_normal(v.shape) for k, v in params.items()}
    base = {k: np.asarray(v, np.float64) for k, v in params.items()}
    eps = 1e-5
    shifted = [
        e.loss_float64(TINY, {k: base[k] + sign * eps * direction[k] for k in base}, x)
        for sign in (1, -1)
    ]
    numeric = (shifted[0] - shifted[1]) / (2 * eps)
    analytic = sum(float(np.sum(np.asarray(reference[k], np.float64) * direction[k])) for k in base)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-3)


# --- excluding a name (the section of that title on the page) ------------------------------


def test_save_anything_except_these_names_answers_as_this_jax_implements_it():
    """JAX 0.5.0 to 0.9.2 implement the policy as documented (it refuses the `name` equations
    with its names); later releases answer yes to every value. The page glues the installed
    release's answer, so the test reads it in the same run and checks the two agree."""
    listings = e.name_exclusion(SIZES["small"])
    describe = {k: [r.describe() for r in v] for k, v in listings.items()}
    shipped = describe['save_anything_except_these_names("attn_logits")']
    honoured = policies.excluded_names_honoured()  # measured on a value the backward pass reads
    # Either way it keeps what everything_saveable keeps here: the logits are not a residual.
    assert shipped == describe["everything_saveable"]
    assert shipped == describe['excluding_names("attn_logits")']
    # The shipped policy's answer for the `name` equation it was told to exclude, taken from a
    # real jaxpr (JAX 0.5 compares the primitive by identity).
    (eqn,) = jax.make_jaxpr(lambda t: checkpoint_name(t, "attn_logits"))(1.0).eqns
    assert eqn.primitive.name == "name"
    answer = P.save_anything_except_these_names("attn_logits")(eqn.primitive, **eqn.params)
    assert answer is (not honoured)
    assert P.save_anything_except_these_names("attn_logits")(eqn.primitive, name="other") is True


def test_logits_are_not_a_residual_and_an_honoured_exclusion_saves_nothing():
    listings = e.name_exclusion(SIZES["small"])
    everything = listings["everything_saveable"]
    # Softmax, differentiated through its primitives, keeps exp(logits - max), as large as the
    # logits, and its output (div), but never the logits: the page says so.
    assert [r.name for r in everything.of_kind("named")] == ["mlp_hidden"]
    cfg = SIZES["small"]
    logits = f"f32[{cfg.batch},{cfg.heads},{cfg.seq},{cfg.seq}]"
    kept = [(r.primitive, r.type_str) for r in everything]
    assert ("exp", logits) in kept
    assert ("div", logits) in kept
    assert not getattr(jax.config, "jax_softmax_custom_jvp", False)
    honoured_logits = listings['excluding_names("attn_logits")']
    assert [r.describe() for r in honoured_logits] == [r.describe() for r in everything]
    # Refusing "mlp_hidden" keeps the value that feeds checkpoint_name in its place.
    honoured = listings['excluding_names("mlp_hidden")']
    assert not honoured.of_kind("named")
    assert len(honoured) == len(everything)
    assert honoured.nbytes == everything.nbytes
    (named,) = everything.of_kind("named")
    added = collections.Counter(honoured) - collections.Counter(everything)
    assert [(r.primitive, r.shape) for r in added.elements()] == [("mul", named.shape)]
    # The allow-list really drops what it is not told to keep.
    allow = listings['save_any_names_but_these("attn_logits")']
    assert [r.name for r in allow] == ["mlp_hidden"]
    assert allow.nbytes < everything.nbytes / 5
