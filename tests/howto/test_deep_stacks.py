"""examples.howto.deep_stacks: two levels of scan, against the plain stack (values and gradients
in float64) and the page's memory study."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.howto import deep_stacks as ds
from examples.tools import compat


def test_the_nested_scan_computes_and_differentiates_the_plain_stack():
    from examples.tools.models import mlp_layer, stacked_mlp

    with compat.enable_x64(True):
        params, x = stacked_mlp(16, batch=4, width=8)
        params = jax.tree.map(lambda a: a.astype(jnp.float64), params)
        x = x.astype(jnp.float64)

        def plain(p, x):
            return jax.lax.scan(lambda h, w: (mlp_layer(h, w), None), x, p)[0]

        def nested(p, x):
            return ds.nested_scan(jax.checkpoint(mlp_layer, prevent_cse=False), p, x, groups=4)

        np.testing.assert_allclose(nested(params, x), plain(params, x), rtol=1e-12)
        g_plain = jax.grad(lambda p: jnp.sum(plain(p, x) ** 2))(params)
        g_nested = jax.grad(lambda p: jnp.sum(nested(p, x) ** 2))(params)
        for key in g_plain:
            # float64: the two programs sum in different orders, so an entry near zero may differ
            # in its last bits (jax 0.5.0: 1.5e-15 on an entry of 7e-6); the bound is relative
            # to the gradient's size, not to each entry's.
            scale = np.abs(np.asarray(g_plain[key])).max()
            np.testing.assert_allclose(g_nested[key], g_plain[key], rtol=1e-10, atol=1e-12 * scale)
    with pytest.raises(ValueError, match="equal groups"):
        ds.nested_scan(mlp_layer, params, x, groups=5)


@pytest.mark.slow
def test_two_levels_pay_where_the_carry_outweighs_the_weights():
    """The page's study: with the wide carry, two levels need less than one from 64 layers on;
    one level needs less than the plain scan everywhere."""
    batch, width = ds.NESTED_SHAPES["carry larger than weights"]
    study = ds.nested_depth_study(depths=(64, 256), batch=batch, width=width)
    for depth, row in study.items():
        plain, one, two = row.values()
        assert one < plain, depth
        assert two < one, depth
    assert study[256]["scan(checkpoint(layer))"] / study[256][list(study[256])[2]] > 2
