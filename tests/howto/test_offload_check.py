"""examples.howto.offload_check: the offloading policy asks for host memory at every stage, and the
backend decides whether anything moves."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from examples.howto import choose_policy as cp
from examples.howto import offload_check as oc
from examples.tools.models import Config

SHORT = Config(layers=2, batch=1, seq=128, width=64, heads=1)


def test_the_offloading_policy_asks_for_host_memory_and_the_backend_decides():
    check = oc.offload_check(SHORT)
    # JAX keeps the two named values, typed for host memory, and traces their transfers.
    assert len(check.kept) == len(cp.KEEP_NAMES)
    if hasattr(jax.core.ShapedArray((1,), jnp.float32), "memory_space"):
        assert all("host" in r.type_str for r in check.kept), [r.type_str for r in check.kept]
        assert check.to_host_bytes > 0
    else:
        # Releases whose array types carry no memory space (before 0.6) name the destination
        # in the transfer itself: one device_put to pinned host memory per kept name.
        params, x = cp.init(SHORT)
        step = jax.value_and_grad(cp.make_loss(SHORT, oc.offload_policy()))
        text = str(jax.make_jaxpr(step)(params, x))
        assert text.count("TransferToMemoryKind(memory_kind='pinned_host')") == len(cp.KEEP_NAMES)
    # A GPU is given placement annotations (lowered for it from any machine) ...
    assert check.placements["cuda"] > 0
    # ... and where this backend's program carries none, nothing moves: no host buffer, and the
    # device memory of keeping the same names on the device.
    # (The backend JAX calls "gpu" is the platform "cuda" a program is lowered for.)
    if check.placements[{"gpu": "cuda"}.get(jax.default_backend(), jax.default_backend())] == 0:
        assert check.host_buffers == 0
        assert check.stats.temp_bytes == check.on_device.temp_bytes
        assert not check.stats.host_temp_bytes
