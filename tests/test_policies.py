"""examples.policies: the catalogue is complete, and each policy saves what it says."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from examples import policies
from examples.measure import compiled_stats

P = jax.checkpoint_policies
ARGS = policies.model_inputs()


def computed(policy):
    return policies.residuals(policy, *ARGS).excluding_arguments()


def test_catalogue_describes_every_public_policy_of_the_installed_jax():
    assert policies.undocumented_policies() == set(), (
        "the installed JAX has checkpoint policies the reference page does not describe: "
        "add them to examples.policies.CATALOGUE"
    )


def test_catalogue_names_only_policies_jax_has():
    assert policies.missing_from_jax() == set()


def test_aliases_are_found_by_identity():
    assert policies.BY_NAME["checkpoint_dots"].alias_of == "dots_saveable"
    assert (
        policies.BY_NAME["checkpoint_dots_with_no_batch_dims"].alias_of
        == "dots_with_no_batch_dims_saveable"
    )
    others = set(policies.BY_NAME) - {"checkpoint_dots", "checkpoint_dots_with_no_batch_dims"}
    assert all(policies.BY_NAME[n].alias_of is None for n in others)


def test_everything_saveable_keeps_what_no_checkpoint_keeps():
    plain = policies.residuals(None, *ARGS)
    everything = policies.residuals(P.everything_saveable, *ARGS)
    assert [r.describe() for r in plain] == [r.describe() for r in everything]


def test_nothing_saveable_keeps_no_computed_value():
    assert len(computed(P.nothing_saveable)) == 0


def test_dots_saveable_keeps_all_four_products():
    kept = computed(P.dots_saveable)
    assert [r.primitive for r in kept] == ["dot_general"] * 4
    # Two products carry the batch dimension and have (b, s, t) or (b, s, h) outputs.
    assert (2, 4, 4) in [r.shape for r in kept]


def test_dots_with_no_batch_dims_keeps_only_the_weight_products():
    kept = computed(P.dots_with_no_batch_dims_saveable)
    assert [r.primitive for r in kept] == ["dot_general"] * 2
    assert all(r.shape == (2, 4, 8) for r in kept)
    assert (2, 4, 4) not in [r.shape for r in kept]


def test_name_policies():
    assert [r.name for r in computed(P.save_only_these_names("hidden"))] == ["hidden"]
    assert [r.name for r in computed(P.save_any_names_but_these("hidden"))] == ["pre_activation"]


def test_save_only_these_names_with_both_names_keeps_exactly_those():
    kept = computed(P.save_only_these_names(*policies.NAMES))
    assert sorted(r.name for r in kept) == sorted(policies.NAMES)
    assert all(r.kind == "named" for r in kept)


def test_save_from_both_policies_is_the_union():
    both = computed(policies.BY_NAME["save_from_both_policies"].build())
    dots = computed(P.dots_with_no_batch_dims_saveable)
    named = computed(P.save_only_these_names("hidden"))
    assert sorted(r.describe() for r in both) == sorted(r.describe() for r in dots + named)


def test_offload_policies_list_host_residuals():
    kept = computed(policies.BY_NAME["offload_dot_with_no_batch_dims"].build())
    assert len(kept) == 2
    assert all("<host>" in r.type_str for r in kept)
    mixed = computed(policies.BY_NAME["save_and_offload_only_these_names"].build())
    assert [r.name for r in mixed if r.kind == "named"] == ["pre_activation"]
    assert sum("<host>" in r.type_str for r in mixed) == 1


@pytest.mark.parametrize("name", sorted(policies.BY_NAME))
def test_gradients_do_not_depend_on_the_policy(name):
    with jax.default_matmul_precision("highest"):
        expected = jax.grad(policies.model, argnums=(0, 1))(*ARGS)
        f = jax.checkpoint(policies.model, policy=policies.BY_NAME[name].build())
        got = jax.jit(jax.grad(f, argnums=(0, 1)))(*ARGS)
    for a, b in zip(expected, got, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_model_against_float64():
    with jax.default_matmul_precision("highest"):
        value = policies.model(*ARGS)
    np.testing.assert_allclose(value, policies.model_float64(*ARGS), rtol=1e-5)


def test_model_gradient_against_float64_finite_differences():
    w1, w2, x = (np.asarray(a, np.float64) for a in ARGS)
    with jax.default_matmul_precision("highest"):
        grad_w2 = np.asarray(jax.grad(policies.model, argnums=1)(*ARGS))
    eps = 1e-6
    for i, j in [(0, 0), (3, 5), (7, 2)]:
        bump = np.zeros_like(w2)
        bump[i, j] = eps
        fd = policies.model_float64(w1, w2 + bump, x) - policies.model_float64(w1, w2 - bump, x)
        np.testing.assert_allclose(grad_w2[i, j], fd / (2 * eps), rtol=1e-3, atol=1e-6)


def test_custom_policy_threshold():
    sizes = sorted(r.shape for r in computed(policies.keep_big_products(1)))
    assert sizes == [(2, 4, 4), (2, 4, 8), (2, 4, 8), (2, 4, 8)]
    assert [r.shape for r in computed(policies.keep_big_products(40))] == [(2, 4, 8)] * 3
    assert len(computed(policies.keep_big_products(1000))) == 0


def test_summary_rows_cover_the_catalogue():
    rows = policies.summary()
    assert [r.policy for r in rows[1:]] == [e.name for e in policies.CATALOGUE]
    by_name = {r.policy: r for r in rows}
    assert by_name["nothing_saveable"].count == 0
    assert by_name["(no jax.checkpoint)"].nbytes == by_name["everything_saveable"].nbytes
    assert by_name["dots_saveable"].nbytes > by_name["dots_with_no_batch_dims_saveable"].nbytes
    assert "| `checkpoint_dots` (= `dots_saveable`) |" in policies.summary_markdown(rows)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", ["save_and_offload_only_these_names", "offload_dot_with_no_batch_dims"]
)
def test_offload_moves_residuals_to_pinned_host_on_gpu(name):
    """On a GPU the offloaded residuals live in pinned host memory in the compiled program."""
    w1, w2, x = policies.model_inputs(batch=8, seq=128, width=256)
    f = jax.checkpoint(policies.model, policy=policies.BY_NAME[name].build())
    grad = jax.grad(f, argnums=(0, 1))
    hlo = jax.jit(grad).lower(w1, w2, x).compile().as_text()
    assert "S(5)" in hlo or "pinned_host" in hlo, "no host memory space in the compiled program"
    stats = compiled_stats(grad, w1, w2, x)
    plain = compiled_stats(
        jax.grad(
            jax.checkpoint(policies.model, policy=P.dots_with_no_batch_dims_saveable),
            argnums=(0, 1),
        ),
        w1,
        w2,
        x,
    )
    assert stats.temp_bytes <= plain.temp_bytes
    expected = jax.grad(policies.model, argnums=(0, 1))(w1, w2, x)
    for a, b in zip(expected, jax.jit(grad)(w1, w2, x), strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-5)
