"""Plan records: written and read back; the committed reference record; and (marked ``plans``,
run by ``nox -s plans`` where libtpu and the CUDA plugin are installed) every accelerator target
compiling the reference step, the policies' order, and a fresh compile matching the record."""

from __future__ import annotations

import importlib.metadata

import jax
import pytest

from examples.tools import recorded
from examples.tools.plan_records import (
    REFERENCE,
    REFERENCE_POLICIES,
    load,
    reference_args,
    reference_plans,
    reference_step,
    reference_targets,
    save,
)
from examples.tools.plans import NO_REMAT, Plans, compile_plan
from examples.tools.targets import TARGETS, compiler_available, installed_compilers, target

ACCELERATORS = reference_targets(TARGETS)
#: The order the policies imply: each saves a subset of what the one after it saves.
ORDER = ("nothing_saveable", "dots_with_no_batch_dims_saveable", "everything_saveable")


def test_a_record_round_trips_and_is_never_overwritten(tmp_path):
    plans = Plans([compile_plan(reference_step(NO_REMAT), *reference_args(), target="cpu")])
    path = save(plans, tmp_path / "cpu.json")
    again, runinfo = load(path)
    assert again.plans == plans.plans
    assert runinfo["jax"] == jax.__version__
    assert "compilers" in runinfo
    assert "gpu_specs" in runinfo
    with pytest.raises(FileExistsError, match="not overwriting"):
        save(plans, path)


def test_a_file_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "other.json"
    path.write_text('{"schema": "jax-remat-guide/offload/1", "runinfo": {}}')
    with pytest.raises(recorded.RecordError, match="schema is 'jax-remat-guide/offload/1'"):
        load(path)


def test_the_committed_reference_record_covers_every_accelerator_target():
    plans, runinfo = load(REFERENCE)
    assert {p.target for p in plans.plans} == set(ACCELERATORS)
    for name in ACCELERATORS:
        assert [p.label for p in plans.plans if p.target == name] == list(REFERENCE_POLICIES)
    assert set(runinfo["compilers"]) == {"libtpu", "jax-cuda13-plugin"}
    assert runinfo["gpu_specs"]["h100-80gb"] == "h100_sxm.txtpb"
    for p in plans.plans:
        assert p.device_kind == target(p.target).device_kind
        assert p.error is None
        assert p.fits


@pytest.mark.parametrize("name", ACCELERATORS)
def test_in_the_record_saving_more_never_plans_less_memory(name):
    plans, _ = load(REFERENCE)
    temps = [plans.get(name, label).temp_bytes for label in ORDER]
    assert temps == sorted(temps), f"{name}: temporaries {dict(zip(ORDER, temps, strict=True))}"
    assert temps[0] < temps[-1]  # and the order is not a tie


# --- marked `plans`: compiled for every target whose compiler is installed ---------------------

_fresh: dict[str, Plans] = {}


def fresh(name: str) -> Plans:
    """The reference step compiled for ``name`` now (once per test session)."""
    if not compiler_available(name):
        pytest.skip(f"the compiler for {name!r} is not installed here (see `nox -s plans`)")
    if name not in _fresh:
        _fresh[name] = reference_plans([name])
    return _fresh[name]


@pytest.mark.plans
@pytest.mark.parametrize("name", ACCELERATORS)
def test_every_target_compiles_the_reference_step(name):
    t = target(name)
    for p in fresh(name).plans:
        assert (p.device_kind, p.device_count) == (t.device_kind, t.device_count)
        assert p.error is None
        assert p.temp_bytes is not None
        assert p.flops is not None
        assert p.flops > 0
        # x is sharded over the devices, w replicated: the arguments per device say so
        w, x = reference_args()
        w_bytes = w.size * w.dtype.itemsize
        x_bytes = x.size * x.dtype.itemsize
        assert p.argument_bytes >= w_bytes + x_bytes // t.device_count


@pytest.mark.plans
@pytest.mark.parametrize("name", ACCELERATORS)
def test_saving_more_never_plans_less_memory(name):
    plans = fresh(name)
    temps = [plans.get(name, label).temp_bytes for label in ORDER]
    assert temps == sorted(temps), f"{name}: temporaries {dict(zip(ORDER, temps, strict=True))}"
    assert temps[0] < temps[-1]


@pytest.mark.plans
@pytest.mark.parametrize("name", ACCELERATORS)
def test_a_fresh_compile_matches_the_committed_record(name):
    if not compiler_available(name):
        pytest.skip(f"the compiler for {name!r} is not installed here (see `nox -s plans`)")
    recorded_plans, runinfo = load(REFERENCE)
    same = (runinfo["jax"], runinfo["jaxlib"], runinfo["compilers"]) == (
        jax.__version__,
        importlib.metadata.version("jaxlib"),
        installed_compilers(),
    )
    if not same:
        pytest.skip(
            f"the record was compiled with jax {runinfo['jax']} and {runinfo['compilers']}; "
            f"this is jax {jax.__version__} with {installed_compilers()}: record it again "
            "(`nox -s plans -- python -m examples.tools.plan_records record PATH`)"
        )
    for label in REFERENCE_POLICIES:
        then, now = recorded_plans.get(name, label), fresh(name).get(name, label)
        for field in ("temp_bytes", "argument_bytes", "output_bytes", "alias_bytes", "flops"):
            assert getattr(now, field) == getattr(then, field), f"{name}, {label}: {field}"
        assert now.collectives == then.collectives
