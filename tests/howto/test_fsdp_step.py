"""examples.howto.fsdp_step: the guide's mesh and its FSDP step, on the one device the test
process has (the eight-device checks of the step are in tests/howto/test_sharding.py)."""

from __future__ import annotations

import jax
import pytest

from examples.howto import fsdp_step as F
from examples.howto import sharding as s
from examples.tools.models import init_inputs, init_params


def test_a_mesh_larger_than_the_devices_says_how_to_get_more():
    with pytest.raises(RuntimeError, match="jax_num_cpu_devices") as err:
        F.make_mesh((len(jax.devices()) + 1, 1))
    assert "xla_force_host_platform_device_count" in str(err.value)


def test_the_transpose_of_all_gather_is_a_reduce_scatter():
    mesh = F.make_mesh((1, 1))
    cfg = s.CHECK_CONFIG
    params, x = F.place(mesh, init_params(cfg), init_inputs(cfg))
    jaxpr = jax.make_jaxpr(jax.grad(F.shard_map_loss(cfg, mesh, None)))(params, x)
    assert "reduce_scatter" in str(jaxpr)
