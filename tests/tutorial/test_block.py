"""The tutorial's transformer-shaped block (examples.tutorial.block): which values each policy
keeps, gradients with and without remat against a float64 reference, and the dots policies
landing between keeping nothing and keeping everything."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from examples.tools import compat
from examples.tools.models import Config, scan_loss
from examples.tutorial import block as B

SMALL = Config(layers=2, batch=2, seq=4, width=16, heads=2)
cp = jax.checkpoint_policies


def _computed(policy, cfg=SMALL):
    return B.layer_residuals(policy, cfg).excluding_arguments()


def _products(kept):
    return sorted(r.shape for r in kept if r.primitive == "dot_general")


def test_nothing_saveable_keeps_only_arguments():
    assert len(_computed(cp.nothing_saveable)) == 0
    assert len(B.layer_residuals(cp.nothing_saveable, SMALL)) > 0


def test_dots_with_no_batch_dims_keeps_the_three_weight_products_a_gradient_reads():
    b, s, d = SMALL.batch, SMALL.seq, SMALL.width
    kept = _computed(cp.dots_with_no_batch_dims_saveable)
    # qkv projection, attention output projection, MLP widening; the last product (w2) is added
    # to the output and no backward rule reads it.
    assert _products(kept) == sorted([(b, s, 3 * d), (b, s, d), (b, s, 4 * d)])
    assert len(kept) == 3


def test_dots_saveable_also_keeps_the_two_batched_attention_products():
    b, s, d, h = SMALL.batch, SMALL.seq, SMALL.width, SMALL.heads
    no_batch = _products(_computed(cp.dots_with_no_batch_dims_saveable))
    dots = _products(_computed(cp.dots_saveable))
    extra = list(dots)
    for shape in no_batch:
        extra.remove(shape)
    # dot_general puts the batch dimensions (b, h) first in its output; the order of the other
    # two is einsum's choice of operand order, which releases may change.
    assert all(shape[:2] == (b, h) for shape in extra)
    assert sorted(tuple(sorted(shape[2:])) for shape in extra) == sorted(
        [(s, s), tuple(sorted((s, d // h)))]
    )


def test_everything_saveable_keeps_what_no_checkpoint_keeps():
    plain = B.layer_residuals(None, SMALL).excluding_arguments()
    everything = _computed(cp.everything_saveable)
    # The same arrays, up to scalar constants the plain trace lists.
    big = lambda rs: sorted((r.shape, r.nbytes) for r in rs if r.shape)
    assert big(plain) == big(everything)


def test_dots_policies_keep_strictly_between_nothing_and_everything():
    nbytes = {name: _computed(p).nbytes for name, p in B.policies().items()}
    assert (
        nbytes["nothing_saveable"]
        < nbytes["dots_with_no_batch_dims_saveable"]
        < nbytes["dots_saveable"]
        < nbytes["everything_saveable"]
    )


def test_the_hand_written_policy_keeps_what_dots_with_no_batch_dims_keeps():
    mine = _computed(B.keep_weight_products)
    theirs = _computed(cp.dots_with_no_batch_dims_saveable)
    assert [(r.shape, r.kind) for r in mine] == [(r.shape, r.kind) for r in theirs]


def test_the_hand_written_policy_receives_the_equations_params():
    seen = []

    def spy(prim, *avals, **params):
        seen.append((prim, avals, params))
        return B.keep_weight_products(prim, *avals, **params)

    _computed(spy)
    dots = [(avals, params) for prim, avals, params in seen if prim is jax.lax.dot_general_p]
    assert dots
    assert all("dimension_numbers" in params and len(avals) == 2 for avals, params in dots)


def test_the_offload_policy_moves_the_named_value_to_the_host():
    kept = _computed(B.offload_mlp_hidden())
    assert len(kept) == 1
    assert kept[0].on_host
    assert kept[0].shape == (SMALL.batch, SMALL.seq, 4 * SMALL.width)


def _grad(policy, params, x):
    layer = B.block_layer(SMALL)
    body = layer if policy is None else jax.checkpoint(layer, policy=policy)
    return jax.grad(scan_loss(body))(params, x)


@pytest.mark.parametrize(
    "policy",
    [None, *B.policies().values(), B.keep_weight_products],
    # Named, not repr'd: a function's repr holds its address, which differs between xdist workers.
    ids=lambda p: "no checkpoint" if p is None else getattr(p, "__name__", type(p).__name__),
)
def test_gradients_match_a_float64_reference(policy):
    params, x = B.block_inputs(SMALL)
    with compat.enable_x64(True):
        p64 = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
        reference = _grad(None, p64, np.asarray(x, np.float64))
        reference = jax.tree.map(np.asarray, reference)
    got = _grad(policy, params, x)
    for name in reference:
        assert got[name].dtype == np.float32
        np.testing.assert_allclose(got[name], reference[name], rtol=2e-3, atol=2e-5)


@pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="the page's XLA figures are measured on the CPU"
)
def test_policy_rows_order_memory_and_flops():
    rows = {r.policy: r for r in B.policy_rows(SMALL)}
    nothing, everything = rows["nothing_saveable"], rows["everything_saveable"]
    assert nothing.temp_bytes < everything.temp_bytes
    assert nothing.flops > rows["no checkpoint"].flops
    assert nothing.kept == 0
    assert (
        nothing.kept_bytes
        < rows["dots_with_no_batch_dims_saveable"].kept_bytes
        < rows["dots_saveable"].kept_bytes
        < everything.kept_bytes
    )
    facts = B.policy_facts(list(rows.values()))
    assert facts["block_no_batch_kept"] == 3
    assert facts["block_dots_kept"] == 5
    assert B.policy_table(list(rows.values())).to_markdown().count("\n") == len(rows) + 1


@pytest.mark.slow
@pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="the page's XLA figures are measured on the CPU"
)
def test_policy_rows_on_the_page_land_between_nothing_and_everything():
    # The page's own configuration: the dots policies' compiled memory lies strictly between.
    facts = B.policy_facts(B.policy_rows())
    assert facts["block_no_batch_where"] == "between the two"
    assert facts["block_dots_where"] == "between the two"
