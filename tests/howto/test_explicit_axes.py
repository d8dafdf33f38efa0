"""examples.howto.explicit_axes: the sharded step on an ``Explicit`` mesh, against the ``Auto``
one. Eight devices are needed, so the comparison runs in a subprocess started with eight CPU
devices, as tests/howto/test_sharding.py runs the guide's own measurements."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from examples.howto import explicit_axes as ea
from examples.howto import fsdp_step as F
from examples.howto import sharding as s
from examples.tools.models import scan_loss

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not ea.has_explicit_axes(),
    reason=f"jax {jax.__version__} lacks Explicit mesh axes or jax.sharding.reshard",
)


@pytest.fixture(scope="module")
def compared():
    env = {
        **os.environ,
        # Eight host devices, beside the flags the session gave (noxfile.py's cheap codegen).
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "examples.howto.explicit_axes"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_reshard_gathers_on_explicit_axes():
    """(tests/howto/test_sharding.py checks that the constraint is refused there.)"""
    mesh = ea.explicit_mesh((1, 1))
    x = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh, P("data")))
    with ea.mesh_context(mesh):
        out = jax.jit(lambda x: jax.sharding.reshard(x * 2, P()))(x)
    np.testing.assert_array_equal(out, 2 * np.ones((8, 4)))
    assert set(out.sharding.spec) <= {None}  # replicated


def test_the_gradient_on_one_device_matches_the_plain_one():
    cfg = s.CHECK_CONFIG
    mesh = ea.explicit_mesh((1, 1))
    params, x = s.single_device(cfg)
    placed = {k: jax.device_put(v, NamedSharding(mesh, F.WEIGHTS)) for k, v in params.items()}
    xs = jax.device_put(x, NamedSharding(mesh, F.BATCH))
    with ea.mesh_context(mesh):
        grads = ea.explicit_step(cfg, F.POLICIES[ea.COMPARED[1]])(placed, xs)
    plain = jax.jit(jax.grad(scan_loss(s.plain_layer(cfg, None))))(params, x)
    assert s.max_difference(grads, plain) < 1e-5


@pytest.mark.slow
def test_the_policies_do_on_explicit_axes_what_they_do_on_auto_axes(compared):
    for auto, explicit in zip(compared["auto"], compared["explicit"], strict=True):
        assert auto["policy"] == explicit["policy"]
        for key in ("temp_bytes", "gathers_forward", "gathers_backward", "gathered_bytes"):
            assert auto[key] == explicit[key], (auto["policy"], key)
    recompute, keep = compared["explicit"]
    assert recompute["gathers_backward"] > 0
    assert keep["gathers_backward"] == 0
    assert keep["gathered_bytes"] < recompute["gathered_bytes"]
