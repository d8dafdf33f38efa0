"""examples.reference.policy_differences: what the installed JAX's policies do where releases
differ, each answer checked against the listing, the call or JAX's source."""

from __future__ import annotations

import jax
import pytest
from reference._helpers import ARGS, computed, describe

from examples.reference import policies
from examples.reference import policy_differences as D

P = jax.checkpoint_policies


def test_alias_check_matches_the_listing_without_checkpoint():
    plain = computed(None)
    both = "hidden" in [r.name for r in plain] and "tanh" in [r.primitive for r in plain]
    assert D.alias_listed_with_its_input() == both


def test_save_from_both_policies_with_nothing_saveable_as_each_release_does():
    offloading = P.offload_dot_with_no_batch_dims("device", "pinned_host")
    both = P.save_from_both_policies(P.nothing_saveable, offloading)
    f = jax.checkpoint(policies.model, policy=both)
    if D.combination_short_circuits():
        # Newer releases hand back the other policy itself: the offload policy runs as it is.
        assert both is offloading
        assert describe(computed(both)) == describe(computed(offloading))
        assert P.save_from_both_policies(offloading, P.nothing_saveable) is offloading
        assert P.save_from_both_policies(P.everything_saveable, offloading) is (
            P.everything_saveable
        )
        jax.grad(f)(*ARGS)
    else:
        # Older releases build the combined function even here, and it insists on two bools.
        assert both is not offloading
        with pytest.raises(ValueError, match="should be a boolean"):
            jax.grad(f)(*ARGS)


def test_scaled_matmul_kept_as_the_source_says():
    # jax/_src/ad_checkpoint.py names the cuDNN scaled matmul in dots_saveable (jax 0.10.2 on);
    # jax 0.5.0 has no such clause. The page's sentence follows the measured answers.
    import inspect

    from jax._src import ad_checkpoint

    # A function on most releases; an instance of a class on jax 0.6 to 0.10 (DotsSaveable),
    # whose source is its class's.
    policy = ad_checkpoint.dots_saveable
    source = inspect.getsource(policy if inspect.isfunction(policy) else type(policy))
    in_source = "scaled_matmul_wrapper" in source
    kept = D.scaled_matmul_kept()
    assert kept["dots_saveable"] is in_source
    assert kept["no_batch_dims, batch 2"] is False
    assert kept["no_batch_dims, batch 1"] is in_source
    assert kept["offload, batch 1"] != "Offloadable"
    sentence = D.scaled_matmul_sentence(kept)
    assert ("also keeps" in sentence) is in_source
    assert ("leading (batch) dimension is 1" in sentence) is in_source
