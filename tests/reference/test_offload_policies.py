"""examples.reference.offload_policies: offloaded residuals, the evidence of where they go, and the
page's offload table."""

from __future__ import annotations

import jax
import pytest
from reference._helpers import computed, describe

from examples.reference import offload_policies as offload
from examples.reference import policies

P = jax.checkpoint_policies


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="describes the CPU backend")
def test_cpu_backend_keeps_offloaded_values_where_they_are():
    """What the page reports for CPU: the jaxpr asks for host memory, the compiled code does not."""
    for name, transfers in [
        ("save_and_offload_only_these_names", 1),
        ("offload_dot_with_no_batch_dims", 2),
    ]:
        evidence = offload.offload_evidence(policies.BY_NAME[name].build())
        assert evidence.jaxpr_host_transfers == transfers, name
        assert not evidence.compiled_uses_host_memory, name
        assert not evidence.host_temp_bytes, name
        assert evidence.grad_max_abs_diff <= 1e-5 * evidence.grad_scale, name


def test_custom_policy_with_saveable_offloadable_recompute():
    kept = computed(offload.names_to_host("hidden"))
    on_host = [r for r in kept if r.on_host]
    on_device = [r for r in kept if not r.on_host]
    assert len(on_host) == 1
    assert on_host[0].shape == (2, 4, 8)
    assert [r.primitive for r in on_device] == ["dot_general"] * 2
    assert describe(on_device) == describe(computed(P.dots_with_no_batch_dims_saveable))
    # Naming nothing that exists leaves only the device-side products.
    assert describe(computed(offload.names_to_host("nope"))) == describe(on_device)


def test_offload_table_has_one_row_per_policy():
    names = ("offload_dot_with_no_batch_dims", "nothing_saveable")
    table = offload.offload_table(names)
    assert table.column("policy") == [f"`{n}`" for n in names]
    assert table.column("host transfers in jaxpr") == ["2", "0"]  # two products to the host


# --- on a GPU, offloaded residuals really go to pinned host memory ------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", ["save_and_offload_only_these_names", "offload_dot_with_no_batch_dims"]
)
def test_offload_moves_residuals_to_pinned_host_on_gpu(name):
    """The compiled program places the offloaded residuals in host memory, unlike a control."""
    assert "pinned_host" in offload.memory_kinds()
    args = policies.model_inputs(batch=8, seq=128, width=256)
    with jax.default_matmul_precision("highest"):
        evidence = offload.offload_evidence(policies.BY_NAME[name].build(), *args)
        control = offload.offload_evidence(P.dots_with_no_batch_dims_saveable, *args)
    assert evidence.jaxpr_host_transfers > 0, evidence
    # XLA shows host placement in the HLO (memory space S(5)) and/or in its memory analysis.
    assert evidence.compiled_uses_host_memory or (evidence.host_temp_bytes or 0) > 0, evidence
    assert control.jaxpr_host_transfers == 0, control
    assert not control.compiled_uses_host_memory, control
    assert not control.host_temp_bytes, control
    assert evidence.grad_max_abs_diff <= 1e-4 * evidence.grad_scale, evidence
