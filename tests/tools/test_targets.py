"""The targets: names, the messages a reader gets, the GPU specs, the compilers' errors parsed.

None of these needs an accelerator compiler; the tests marked ``plans`` (tests/tools/
test_plan_records.py, test_plans.py) compile on every target where the compilers are installed.
"""

from __future__ import annotations

import re

import jax
import pytest

from examples.tools import targets
from examples.tools.targets import (
    ALIASES,
    TARGETS,
    CompilerMissing,
    OutOfMemory,
    UnknownTarget,
    count_collectives,
    devices,
    machine,
    target,
)

#: The TPU compiler's refusal, verbatim, as libtpu 0.0.50.1 (jax 0.12.0.1) wrote it on this
#: project's machine for ``jnp.tanh(x @ w) @ w.T`` with x f32[3145728, 1024] on one v5e chip.
TPU_OOM = (
    "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total memory "
    "required for HLO temporaries (30.00G) exceeds available HBM (15.75G). HLO module: jit_f.\n"
    "See https://openxla.org/xla/errors/error_1000 for more details."
)
#: Issue 35's excerpt of the same error for a 24-layer scan (its middle elided there).
TPU_OOM_ISSUE = (
    "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: ... the total memory required for HLO "
    "temporaries (18.94G) exceeds available HBM (15.75G)"
)


def test_an_unknown_target_names_the_known_ones():
    with pytest.raises(UnknownTarget) as caught:
        target("h100")
    message = str(caught.value)
    assert "'h100'" in message
    for name in TARGETS:
        assert repr(name) in message


def test_every_target_named_in_the_contract_is_known():
    for name in ("cpu", "h100-80gb", "h100-80gb x8", "a100-80gb", "a100-80gb x8",
                 "tpu-v5e:2x2", "tpu-v5e x4", "tpu-v6e:2x2", "tpu-v5p:2x2x1"):  # fmt: skip
        assert target(name).name in TARGETS
    assert target("tpu-v5e x4") is TARGETS["tpu-v5e:2x2"]
    assert all(alias_to in TARGETS for alias_to in ALIASES.values())
    assert target(TARGETS["cpu"]) is TARGETS["cpu"]


@pytest.mark.parametrize(
    ("name", "count", "platform"),
    [
        ("h100-80gb", 1, "cuda"),
        ("a100-80gb x8", 8, "cuda"),
        ("tpu-v5e:2x2", 4, "tpu"),
        ("tpu-v5p:2x2x1", 4, "tpu"),
        ("cpu", 1, "cpu"),
    ],
)
def test_device_counts_and_platforms(name, count, platform):
    t = target(name)
    assert (t.device_count, t.platform) == (count, platform)


def test_a_gpu_target_takes_its_memory_from_the_committed_spec():
    """The spec's own figure, read from the file independently of the module's parser."""
    for name in ("h100-80gb", "a100-80gb x8"):
        t = target(name)
        text = t.spec_text
        assert text.startswith("# Copyright 2024 The OpenXLA Authors.")
        (size,) = re.findall(r"^\s*device_memory_size: (\d+)$", text, flags=re.M)
        assert t.memory_bytes == int(size)
        assert f'device_description_str: "{t.device_kind}"' in text
    assert target("h100-80gb").memory_bytes == 84_978_434_048  # 79.1 GiB: the spec's figure


def test_tpu_memory_is_the_chips_hbm():
    assert target("tpu-v5e:2x2").memory_bytes == 16 * 1024**3
    assert target("tpu-v6e:2x2").memory_bytes == 32 * 1024**3
    assert target("tpu-v5p:2x2x1").memory_bytes == 95 * 1024**3


def test_a_missing_compiler_names_the_package_that_brings_it(monkeypatch):
    """Whatever is installed here: the module that proves a compiler is there is renamed to one
    that does not exist. Nothing is asked of a device or of the network."""
    monkeypatch.setitem(targets._COMPILERS, "tpu", ("libtpu", "no_such_libtpu_module", "tpu"))
    monkeypatch.setitem(
        targets._COMPILERS, "cuda", ("jax-cuda13-plugin", "no_such_cuda_plugin", "cuda13")
    )
    with pytest.raises(
        CompilerMissing, match=re.escape(f'pip install "jax[tpu]=={jax.__version__}"')
    ):
        devices("tpu-v5e:2x2")
    with pytest.raises(CompilerMissing, match=r"jax-cuda13-plugin.*jax\[cuda13\]") as caught:
        devices("h100-80gb x8")
    assert "nox -s plans" in str(caught.value)
    assert not targets.compiler_available("h100-80gb")
    assert targets.compiler_available("cpu")


def test_where_libtpu_is_absent_the_real_error_names_it():
    if targets.compiler_available("tpu-v5e:2x2"):
        pytest.skip("libtpu is installed here: the message is tested with a renamed module above")
    with pytest.raises(CompilerMissing, match=r"'libtpu'.*jax\[tpu\]"):
        devices("tpu-v5e:2x2")


def test_the_cpu_target_is_this_process_cpu():
    (cpu,) = devices("cpu")
    assert cpu.platform == "cpu"
    assert target("cpu").memory_bytes > 0


@pytest.mark.parametrize(
    ("message", "required", "available"),
    [
        (TPU_OOM, 30.00 * 1024**3, 15.75 * 1024**3),
        (TPU_OOM_ISSUE, 18.94 * 1024**3, 15.75 * 1024**3),
    ],
)
def test_the_tpu_compilers_out_of_memory_error_is_parsed(message, required, available):
    oom = OutOfMemory.parse(message)
    assert oom is not None
    assert oom.message == message  # verbatim
    assert oom.required_bytes == round(required)
    assert oom.available_bytes == round(available)


@pytest.mark.parametrize(
    "message",
    [
        "INVALID_ARGUMENT: MemoryStats is only supported for addressable PjRt devices.",
        "RESOURCE_EXHAUSTED: too many open files",
        "UNIMPLEMENTED: something else",
    ],
)
def test_other_errors_are_not_taken_for_out_of_memory(message):
    assert OutOfMemory.parse(message) is None


def test_collectives_are_counted_once_per_instruction():
    """Lines as XLA's GPU compiler prints them (an async pair counts once; a fusion's name or an
    operand named after a collective does not count)."""
    hlo = "\n".join(
        [
            "  %all-gather-start = (bf16[64,512]{1,0}, bf16[512,512]{1,0}) all-gather-start(%p0), "
            "channel_id=1, replica_groups=[1,8]<=[8], dimensions={0}",
            "  %all-gather-done = bf16[512,512]{1,0} all-gather-done(%all-gather-start)",
            "  %reduce-scatter.1 = f32[64,512]{1,0} reduce-scatter(%dot.3), channel_id=2, "
            "dimensions={0}, to_apply=%add",
            "  %all-reduce = f32[] all-reduce(%reduce.1), channel_id=3, to_apply=%add",
            "  %copy = f32[64,512]{1,0} copy(%reduce-scatter.1)",
        ]
    )
    assert count_collectives(hlo) == {"all-gather": 1, "reduce-scatter": 1, "all-reduce": 1}
    assert count_collectives("") == {}


def test_the_machine_record_names_every_version_a_plan_depends_on():
    info = machine()
    assert info["jax"] == jax.__version__
    assert {"device", "backend", "jaxlib", "python", "compilers", "gpu_specs"} <= set(info)
    assert info["gpu_specs"]["h100-80gb x8"] == "h100_sxm.txtpb"
    assert set(info["compilers"]) <= {"libtpu", "jax-cuda13-plugin"}
