"""examples.reference.policy_scope: nested checkpoints, a name inside a custom_vjp forward rule,
and the bytes a policy keeps, each against an independent reading (the same function without one
of its checkpoints, the gradient without remat, a count of bytes from the shapes by hand)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.notes.remat3_check import flag_available, remat3_flag
from examples.reference import policies
from examples.reference import policy_scope as s
from examples.tools.residuals import saved_residuals

P = jax.checkpoint_policies
FLAGS = [False, True] if flag_available() else [None]


def _kept(build, remat3_on):
    """What ``build()`` keeps, built and run with the flag as given (some releases read the
    flag when jax.checkpoint wraps)."""
    args = s.nested_inputs()
    if remat3_on is None:
        return saved_residuals(build(), *args).excluding_arguments()
    with remat3_flag(remat3_on):
        return saved_residuals(build(), *args).excluding_arguments()


@pytest.mark.parametrize("remat3_on", FLAGS)
@pytest.mark.parametrize("case", list(s.nested_cases()))
def test_nested_gradients_are_the_gradients_without_remat(case, remat3_on):
    outer, inner = s.nested_cases()[case]
    args = s.nested_inputs()
    plain = jax.grad(s.nested(None, None, outer=False, inner=False))(*args)
    if remat3_on is None:
        got = jax.grad(s.nested(outer, inner))(*args)
    else:
        with remat3_flag(remat3_on):  # built inside: some releases read the flag when wrapping
            got = jax.grad(s.nested(outer, inner))(*args)
    np.testing.assert_allclose(got, plain, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("remat3_on", FLAGS)
def test_the_outer_policy_decides_as_if_the_inner_checkpoint_were_not_there(remat3_on):
    # The page: the outermost checkpoint's policy decides what the forward pass keeps, the inner
    # one's included; print_saved_residuals lists that level.
    names = P.save_only_these_names
    for outer, inner in [(names("a", "b"), names("b")), (names("a"), P.nothing_saveable)]:
        with_inner = _kept(lambda o=outer, i=inner: s.nested(o, i), remat3_on)
        without_inner = _kept(lambda o=outer: s.nested(o, None, inner=False), remat3_on)
        assert len(without_inner) > 0
        if remat3_on and not with_inner:
            # jax 0.10.2's jax_remat3 (measured): values inside a nested checkpoint reach no
            # policy at all, the outer's included; later releases keep what the outer allows.
            assert not s.nested_kept(outer, P.everything_saveable, True).count("'")
            continue
        assert len(with_inner) == len(without_inner)
        if remat3_on:  # listed by name under the flag
            assert [r.name for r in with_inner] == [r.name for r in without_inner]
        else:  # the default lists the inner checkpoint's values as its equation's outputs
            assert {str(r.detail) for r in with_inner} == {"remat2"}
    nothing = _kept(lambda: s.nested(P.nothing_saveable, names("a")), remat3_on)
    assert len(nothing) == 0


def test_the_inner_policy_acts_when_the_backward_pass_recomputes():
    # The outer keeps nothing either way (the listing is empty), yet keeping "a" inside the
    # inner checkpoint saves one sin of the recomputation: the inner policy acts there.
    assert len(_kept(lambda: s.nested(P.nothing_saveable, P.save_only_these_names("a")), None)) == 0
    recompute_all = s.sines_in_gradient(P.nothing_saveable)
    keep_a = s.sines_in_gradient(P.save_only_these_names("a"))
    assert keep_a == recompute_all - 1


@pytest.mark.parametrize("remat3_on", FLAGS)
def test_an_outer_everything_saveable(remat3_on):
    # Default: the outer keeps what no checkpoint at all keeps, the inner policy overruled.
    # jax_remat3 (where everything_saveable is no checkpoint, as remat3_points records): the
    # outer is as if absent, and the inner policy decides within its scope.
    got = _kept(lambda: s.nested(P.everything_saveable, P.save_only_these_names("a")), remat3_on)
    if not remat3_on:
        flat = _kept(lambda: s.nested(None, None, outer=False, inner=False), remat3_on)
        assert len(got) == len(flat)
        return
    from examples.notes import remat3

    short_circuits = remat3.remat3_points()[2] == remat3.POINTS[2][2]
    no_outer = _kept(lambda: s.nested(None, P.save_only_these_names("a"), outer=False), True)
    if short_circuits:
        assert [r.describe() for r in got] == [r.describe() for r in no_outer]
        assert "b" not in {r.name for r in got}  # the inner policy keeps only "a"
    else:
        assert len(got) != len(no_outer)


def test_nested_table_rows_are_the_measurements():
    table = s.nested_table()
    assert len(table.rows) == len(s.nested_cases())
    for row, (outer, inner) in zip(table.rows, s.nested_cases().values(), strict=True):
        assert row[1:] == [s.nested_kept(outer, inner, on) for on in FLAGS]


def test_kept_of_names_counts_and_nothing():
    names = P.save_only_these_names("a", "b")
    listing = _kept(lambda: s.nested(names, P.nothing_saveable), FLAGS[-1])
    text = s.kept_of(listing)
    assert text in ("`'a'`, `'b'`", "2 × `remat2`", "nothing")  # nothing: jax 0.10.2's remat3
    assert (text == "`'a'`, `'b'`") is (FLAGS[-1] is True and bool(listing))
    assert s.kept_of(_kept(lambda: s.nested(P.nothing_saveable, None), FLAGS[-1])) == "nothing"


# --- a name inside a custom_vjp forward rule ----------------------------------------------------


def test_the_custom_rule_is_the_derivative():
    w, x = s.nested_inputs()
    got = jax.grad(s.loss_with_own_rule, argnums=(0, 1))(w, x)
    plain = jax.grad(lambda w, x: jnp.sum(jnp.sin(jnp.sin(w @ x))), argnums=(0, 1))(w, x)
    for a, b in zip(got, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("remat3_on", FLAGS)
def test_a_name_in_a_forward_rule(remat3_on):
    # Measured on jax 0.5.0 to 0.12.0.1: the default implementation keeps the name made in the
    # forward rule; jax_remat3 (0.10.2, 0.11.2, 0.12.0.1) does not, and recomputes it.
    kept = s.custom_rule_name_kept(remat3_on)
    assert kept == ("nothing" if remat3_on else "`'z'`")
    w, x = s.nested_inputs()
    plain = jax.grad(s.loss_with_own_rule)(w, x)

    def grad():
        f = jax.checkpoint(s.loss_with_own_rule, policy=P.save_only_these_names("z"))
        return jax.grad(f)(w, x)

    if remat3_on is None:
        np.testing.assert_allclose(grad(), plain, rtol=1e-6, atol=1e-7)
    else:
        with remat3_flag(remat3_on):
            np.testing.assert_allclose(grad(), plain, rtol=1e-6, atol=1e-7)


# --- the bytes a policy keeps -----------------------------------------------------------------


def _hand_count(batch=2, seq=4, width=8):
    """Bytes of the common model's values, float32, from their shapes."""
    activation = batch * seq * width * 4
    return {
        "inputs": 2 * width * width * 4 + activation,
        "pre_activation": activation,
        "hidden": activation,
        "scores": batch * seq * seq * 4,
    }


def test_kept_bytes_against_a_count_by_hand():
    args = policies.model_inputs()
    hand = _hand_count()
    nothing = s.kept_bytes(jax.checkpoint(policies.model, policy=P.nothing_saveable), *args)
    assert nothing == {"computed": 0, "inputs": hand["inputs"], "arrays": 3}
    names = P.save_only_these_names("pre_activation", "hidden")
    both = s.kept_bytes(jax.checkpoint(policies.model, policy=names), *args)
    assert both["computed"] == hand["pre_activation"] + hand["hidden"]
    dots = s.kept_bytes(jax.checkpoint(policies.model, policy=P.dots_saveable), *args)
    # x @ w1, the scores, the mixed values and mixed @ w2: three activations and the scores
    assert dots["computed"] == 3 * hand["pre_activation"] + hand["scores"]


@pytest.mark.parametrize(
    "name",
    [
        "nothing_saveable",
        "dots_saveable",
        "everything_saveable",
        "dots_with_no_batch_dims_saveable",
    ],
)
def test_kept_bytes_agrees_with_jax_residual_listing(name):
    args = policies.model_inputs()
    f = jax.checkpoint(policies.model, policy=getattr(P, name))
    listing = saved_residuals(f, *args)
    got = s.kept_bytes(f, *args)
    assert got["computed"] == listing.excluding_arguments().nbytes
    assert got["arrays"] == len(listing)
    assert got["inputs"] == listing.nbytes - listing.excluding_arguments().nbytes


def test_the_pages_sentences_follow_the_measurements():
    text = s.nested_everything_sentence()
    flat = saved_residuals(s.nested(None, None, outer=False, inner=False), *s.nested_inputs())
    assert f"keeps all {len(flat.excluding_arguments())} values" in text
    if flag_available():
        flagged = s.nested_kept(P.everything_saveable, P.save_only_these_names("a"), True)
        assert ("inner policy decides" in text) is ("'a'" in flagged and "'b'" not in flagged)
        rule = s.custom_rule_name_sentence()
        assert ("reaches no policy" in rule) is (s.custom_rule_name_kept(True) == "nothing")
    else:
        assert "which has no such flag" in s.custom_rule_name_sentence()
