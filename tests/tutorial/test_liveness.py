"""The traced-peak measure: values freed after their last use, checkpoints inlined."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from examples.tutorial.liveness import peak_bytes, program_peak_bytes
from examples.tutorial.recursive import chain_compose, recursive_checkpoint

X = jnp.ones(256, jnp.float32)  # 1 KiB
ONE = X.nbytes


def _peak(fn, *args):
    return program_peak_bytes(jax.make_jaxpr(fn)(*args))


def test_a_chain_holds_two_values_at_a_time():
    # sin(sin(sin(x))): each value dies when the next is computed; the output stays.
    assert _peak(chain_compose([jnp.sin] * 5), X) == 2 * ONE


def test_values_read_later_stay_alive():
    def keeps_a(x):
        a = jnp.sin(x)
        b = jnp.cos(a)
        c = jnp.exp(b)
        return a + c  # a is read again at the end: a, b, c alive together before b dies

    assert _peak(keeps_a, X) == 3 * ONE


def test_arguments_are_not_counted_and_shapes_are():
    assert _peak(lambda x: x, X) == 0
    assert _peak(lambda x: jnp.concatenate([x, x]), X) == 2 * ONE


def test_a_checkpoint_is_inlined_where_it_sits():
    fn = chain_compose([jnp.sin] * 5)
    assert _peak(jax.checkpoint(fn), X) == _peak(fn, X)


def test_gradient_of_a_sine_chain_holds_every_cosine():
    for depth in (4, 8, 16):
        plain = peak_bytes(chain_compose([jnp.sin] * depth), X)
        # D cosines kept for the backward pass, plus the output's sine and the sum's cotangent.
        assert plain == (depth + 2) * ONE
        assert peak_bytes(recursive_checkpoint([jnp.sin] * depth), X) < plain


def test_loops_are_refused():
    def scanned(x):
        return jax.lax.scan(lambda c, _: (jnp.sin(c), None), x, length=3)[0]

    with pytest.raises(ValueError, match="straight-line programs only"):
        peak_bytes(scanned, X)
