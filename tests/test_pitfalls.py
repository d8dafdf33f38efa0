"""examples.pitfalls: each measured pitfall behaves as the page says."""

from __future__ import annotations

import jax

from examples import pitfalls as p

P = jax.checkpoint_policies


def test_vmap_leaves_dots_with_no_batch_dims_nothing_to_keep():
    alone, mapped = p.vmapped_stages(P.dots_with_no_batch_dims_saveable)
    assert [r.primitive for r in alone.excluding_arguments()] == ["dot_general"]
    assert len(mapped.excluding_arguments()) == 0
    _, mapped_dots = p.vmapped_stages(P.dots_saveable)
    assert [r.primitive for r in mapped_dots.excluding_arguments()] == ["dot_general"]


def test_whole_function_and_last_stage_save_no_compiled_memory():
    costs = p.placement_costs()
    temp = {k: stats.temp_bytes for k, (_, stats) in costs.items()}
    assert temp["whole function"] >= temp["nowhere"]
    assert temp["last stage"] >= temp["nowhere"]
    # Checkpointing the first two stages does drop residuals at the JAX level; whether XLA's
    # compiled memory follows depends on the backend (it did on CPU, not on an H100 under jit).
    kept = {k: listing.excluding_arguments().nbytes for k, (listing, _) in costs.items()}
    assert kept["first two stages"] < kept["nowhere"]


def test_policy_none_means_save_nothing():
    listings = p.none_versus_named_policies()
    describe = lambda k: [r.describe() for r in listings[k]]
    assert describe("policy=None") == describe("nothing_saveable")
    assert describe("policy=None") != describe("everything_saveable")
    assert len(listings["everything_saveable"].excluding_arguments()) > 0


def test_checkpoint_belongs_on_the_scanned_body():
    stats = p.scan_placement(depth=8, batch=16, width=64)
    body = stats["checkpoint on the scanned body"]
    plain = stats["no checkpoint"]
    around = stats["checkpoint around the scan"]
    assert body.temp_bytes < plain.temp_bytes
    assert around.temp_bytes >= body.temp_bytes
    assert body.flops > plain.flops
