"""examples.howto.offload: host offload, its memory kinds and placements, and the GPU run recorder.

The CPU backend drops offload at lowering, so what a step asks to move is read from its jaxpr and
its placements from the program lowered for a GPU; recorded GPU runs are checked as data files.
"""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import pytest

from examples.howto import offload as o
from examples.howto import sharding as s
from examples.tools.compat import jax_version
from examples.tools.models import SIZES, init_inputs, init_params
from examples.tools.residuals import saved_residuals

# --- host offload -------------------------------------------------------------------------------

SMALL = SIZES["tiny"]


@pytest.fixture(scope="module")
def stages():
    return {r.policy: r for r in o.measure(SMALL, time_steps=False)}


def _twin_residual_bytes(cfg, policy_name):
    layer = s.plain_layer(cfg, o.POLICIES[policy_name])
    one = {k: v[0] for k, v in init_params(cfg).items()}
    return saved_residuals(layer, init_inputs(cfg), one).excluding_arguments().nbytes


def test_offload_asks_to_move_what_the_twin_keeps(stages):
    for off, twin in o.ON_DEVICE.items():
        expected = SMALL.layers * _twin_residual_bytes(SMALL, twin)
        assert expected > 0
        assert stages[off].to_host_bytes == stages[off].to_device_bytes == expected
    for name in ("nothing_saveable", *o.ON_DEVICE.values()):
        assert stages[name].to_host_bytes == stages[name].to_device_bytes == 0


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="what the CPU backend does")
def test_the_cpu_backend_drops_offload_at_lowering(stages):
    kinds = set(o.memory_kinds())
    if jax_version() >= (0, 7):
        assert {"device", "pinned_host"} <= kinds
    else:  # before jax 0.7 a CPU device addresses one memory only, its "unpinned_host"
        assert kinds == {"unpinned_host"}
    for off, twin in o.ON_DEVICE.items():
        assert stages[off].annotations == stages[off].host_buffers == 0
        assert stages[off].host_temp_bytes == 0
        assert stages[off].temp_bytes == stages[twin].temp_bytes
    assert o.device_memory_saved(list(stages.values())) == dict.fromkeys(o.ON_DEVICE, 0)


def test_lowered_for_a_gpu_the_step_carries_placements():
    counts = o.placements_by_platform(SMALL)
    assert counts["cpu"] == 0
    # To pinned_host, and back to device: two placements (jax 0.7.2 annotates one more copy to
    # the host, inside the loop).
    assert counts["cuda"] == counts["tpu"] >= 2
    grad = jax.grad(o.make_loss(SMALL, o.POLICIES[o.OFFLOAD_NAMES]))
    lines = o.placement_lines(o.lowered_for("cuda", grad, init_params(SMALL), init_inputs(SMALL)))
    assert len(lines.splitlines()) == counts["cuda"]
    assert '"pinned_host"' in lines.splitlines()[0]
    assert '"device"' in lines.splitlines()[-1]
    assert " loc(" not in lines
    dots = o.placements_by_platform(SMALL, ("cuda",), o.OFFLOAD_DOTS)
    assert dots["cuda"] > 0


def _fake_gpu_run(stages):
    info = {"jax": "0", "jaxlib": "0", "device": "Test GPU", "backend": "gpu"}
    timing = {"median_s": 0.002, "min_s": 0.001, "max_s": 0.003, "repeats": 7}
    results = [dataclasses.replace(r, step=timing) for r in stages.values()]
    return o.Run(info, SMALL, results)


def test_runs_round_trip_and_are_never_overwritten(tmp_path, stages):
    run = _fake_gpu_run(stages)
    path = tmp_path / "gpu.json"
    o.save(run, path)
    assert o.load(path) == run
    with pytest.raises(FileExistsError):
        o.save(run, path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(schema="other"), "schema is 'other'"),
        (lambda d: d["runinfo"].pop("backend"), "runinfo lacks 'backend'"),
        (lambda d: d["results"][0].pop("temp_bytes"), r"results\[0\]: missing temp_bytes"),
        (lambda d: d["results"][0]["step"].pop("min_s"), "step: missing min_s"),
    ],
)
def test_a_malformed_run_is_named(tmp_path, stages, edit, message):
    data = _fake_gpu_run(stages).to_json()
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(o.OffloadDataError, match=message) as err:
        o.load(path)
    assert "bad.json" in str(err.value)


def test_the_page_renders_gpu_runs_or_says_there_is_none(stages):
    empty = o.gpu_report([])._repr_markdown_()
    assert "No GPU run is committed yet" in empty
    assert o.COMMAND in empty
    assert o.status([]) == "no GPU run is committed yet"
    gpu = _fake_gpu_run(stages)
    cpu = dataclasses.replace(gpu, runinfo={**gpu.runinfo, "backend": "cpu", "device": "cpu"})
    shown = o.gpu_report([cpu, gpu])._repr_markdown_()
    assert "Test GPU" in shown
    assert "| policy |" in shown
    assert "median of 7" in shown
    assert o.status([cpu]) == "no GPU run is committed yet"
    saved = o.device_memory_saved(gpu.results)
    table = o.results_table(gpu.results)
    assert table.column("device memory saved").count("") == len(gpu.results) - len(saved)


def test_committed_runs_load(tmp_path):
    data = o.RUNS
    files = sorted(data.glob("*.json"))
    runs = o.load_all(data)
    assert [r.label() for r in runs] == [o.load(f).label() for f in files]
    assert all(r.runinfo["backend"] != "cpu" for r in runs), "a CPU run shows nothing of offload"


def test_the_recorder_refuses_to_overwrite_or_to_record_on_cpu(tmp_path, capsys):
    existing = tmp_path / "there.json"
    existing.write_text("{}")
    assert o.main(["--out", str(existing), "--size", "tiny"]) == 2
    assert existing.read_text() == "{}"
    if jax.default_backend() == "cpu":
        assert o.main(["--out", str(tmp_path / "cpu.json"), "--size", "tiny"]) == 3
        assert "--allow-cpu" in capsys.readouterr().err
        assert not (tmp_path / "cpu.json").exists()


@pytest.mark.slow
def test_the_recorder_writes_a_run_it_can_read(tmp_path):
    out = tmp_path / "run.json"
    assert o.main(["--out", str(out), "--size", "tiny", "--allow-cpu", "--repeats", "7"]) == 0
    run = o.load(out)
    assert run.config == SIZES["tiny"]
    assert [r.policy for r in run.results] == list(o.POLICIES)
    assert all(r.timing.repeats == 7 and r.timing.min_s <= r.timing.median_s for r in run.results)
    assert run.runinfo["backend"] == jax.default_backend()
    assert math.isfinite(run.results[0].temp_bytes)
