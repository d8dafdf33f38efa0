"""examples.tools.policy_calls: every policy reads as the call that made it, on the installed JAX.

The diagnostic and the problems' checker both word their findings with it; these are the cases
the other tests do not reach (their own tests cover JAX's names-based and combined policies).
"""

from __future__ import annotations

import jax

from examples.problems._checks import policy_name
from examples.tools import policy_calls as pc

P = jax.checkpoint_policies


def _mine(prim, *_, **__):
    return False


def test_a_function_of_ones_own_is_named_and_another_object_shown():
    assert pc.describe_policy(_mine) == "the function _mine"
    assert pc.describe_policy(42) == "42"
    assert pc.policy_names(_mine) is None
    assert not pc.wants_unbatched_dots(_mine)


def test_every_public_policy_reads_as_its_own_name():
    for name in ("nothing_saveable", "everything_saveable", "dots_saveable"):
        assert pc.describe_policy(getattr(P, name)) == name
    assert (
        pc.describe_policy(P.dots_with_no_batch_dims_saveable) == "dots_with_no_batch_dims_saveable"
    )


def test_the_checker_and_the_diagnostic_word_a_policy_alike():
    made = P.save_any_names_but_these("b", "a")
    assert policy_name(made) == pc.describe_policy(made) == "save_any_names_but_these('a', 'b')"
    assert policy_name(None).startswith("no policy")
    assert pc.same_policy(P.dots_saveable, P.dots_saveable)
    assert not pc.same_policy(P.dots_saveable, P.nothing_saveable)
