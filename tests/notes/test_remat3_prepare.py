"""examples.notes.remat3_prepare: names in place of a dots policy, and an offloading policy,
with the jax_remat3 flag off and on."""

from __future__ import annotations

import jax
import pytest

from examples.notes import remat3_prepare as n
from examples.notes.remat3_check import flag_available

pytestmark = pytest.mark.skipif(
    not flag_available(), reason=f"jax {jax.__version__} has no jax_remat3 flag"
)


def test_names_replace_a_dots_policy():
    for on in (False, True):
        dots, names = n.dots_versus_names(on)
        assert [r.type_str for r in dots] == [r.type_str for r in names]
        assert {r.kind for r in names.excluding_arguments()} == {"named"}


def test_offloading_policy():
    off = n.offload_kept(False)
    assert "(host)" in off
    assert "(device)" in off
    assert n.offload_kept(True) in (off, "nothing")
