"""examples.tools.models: the shared scan-over-layers models against NumPy float64."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from examples.tools import models


def test_scan_loss_of_tanh_layers_matches_numpy():
    weights, x = models.stacked_tanh(depth=3, batch=4, width=8)
    h = np.asarray(x, np.float64)
    for w in np.asarray(weights, np.float64):
        h = np.tanh(h @ w)
    got = models.scan_loss(models.tanh_layer)(weights, x)
    np.testing.assert_allclose(got, np.mean(h**2), rtol=1e-5)


def test_checkpointed_body_gives_the_same_gradient():
    weights, x = models.stacked_tanh(depth=4, batch=4, width=8)
    plain = jax.grad(models.scan_loss(models.tanh_layer))(weights, x)
    remat = jax.grad(models.scan_loss(jax.checkpoint(models.tanh_layer)))(weights, x)
    np.testing.assert_allclose(plain, remat, rtol=1e-5, atol=1e-7)


def test_transformer_block_keeps_shape_and_config_checks_heads():
    cfg = models.SIZES["tiny"]
    params, x = models.init_params(cfg), models.init_inputs(cfg)
    assert {k: v.shape[0] for k, v in params.items()} == dict.fromkeys(params, cfg.layers)
    one = {k: v[0] for k, v in params.items()}
    assert models.block(x, one, cfg.heads).shape == x.shape
    with pytest.raises(ValueError, match="not divisible"):
        models.Config(layers=1, batch=1, seq=2, width=10, heads=3)


def _backward_counts(policy: object) -> tuple[int, int]:
    """Matrix products and exponentials in the traced gradient of one checkpointed block."""
    import functools

    cfg = models.Config(layers=1, batch=1, seq=8, width=16, heads=2)
    one = jax.tree.map(lambda w: w[0], models.init_params(cfg))
    block = jax.checkpoint(functools.partial(models.named_block, heads=2), policy=policy)
    grad = jax.grad(lambda x, p: block(x, p).sum())
    text = str(jax.make_jaxpr(grad)(models.init_inputs(cfg), one))
    return text.count("dot_general"), text.count(" exp ")


def test_keeping_attn_probs_spares_no_recomputation():
    # named_block's comment: softmax's derivative reads its own output, so keeping the named
    # copy recomputes as many products and exponentials as keeping nothing.
    cp = jax.checkpoint_policies
    nothing = _backward_counts(cp.nothing_saveable)
    assert _backward_counts(cp.save_only_these_names("attn_probs")) == nothing
    assert _backward_counts(cp.everything_saveable) < nothing  # the count does see a saving


def test_named_block_names_match_its_source():
    import inspect

    source = inspect.getsource(models.named_block)
    calls = [line for line in source.splitlines() if "= checkpoint_name(" in line]
    assert len(calls) == len(models.BLOCK_NAMES) == 3
    for name in models.BLOCK_NAMES:
        assert f'"{name}")' in source
