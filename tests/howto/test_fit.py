"""examples.howto.fit: the recorder of "Will it fit?" and the committed plans it wrote.

The records are checked for what a plan implies (the largest batch found fits and the batch above
it does not; keeping more never plans less memory), for naming the machine and every version,
and for covering what the page promises (a GPU target and two TPU targets at >= 1B parameters).
The recorder's own behaviour is tested on the CPU target, whose compiler is always installed.
"""

from __future__ import annotations

import json

import jax
import pytest

from examples.explorer import data as explorer_data
from examples.howto import fit
from examples.howto import fit_model as fm
from examples.tools import plan_records

#: The tests that compile the decoder's step (jax.set_mesh constrains its activations).
needs_set_mesh = pytest.mark.skipif(
    not hasattr(jax, "set_mesh"), reason=f"jax {jax.__version__} has no jax.set_mesh"
)

RECORDS = fit.load_all()
BY_KEY = {(r.target["name"], r.model["name"]): r for r in RECORDS}


def test_the_records_cover_a_gpu_and_two_tpu_targets_at_a_billion_parameters():
    platforms = [r.target["platform"] for r in RECORDS if r.model["params"] >= 1e9]
    assert platforms.count("cuda") >= 1
    assert len({r.target["name"] for r in RECORDS if r.target["platform"] == "tpu"}) >= 2
    for r in RECORDS:
        assert r.model["params"] == fm.param_count(r.config)


def test_each_record_names_the_machine_and_every_version():
    for r in RECORDS:
        info = r.runinfo
        assert info["jax"]
        assert info["jaxlib"]
        assert info["date"]
        assert "compile-only" in info["device"]
        wanted = "libtpu" if r.target["platform"] == "tpu" else "jax-cuda13-plugin"
        assert any(wanted in name for name in info["compilers"]), info["compilers"]


@pytest.mark.parametrize("rec", RECORDS, ids=[f"{t}-{m}" for t, m in BY_KEY])
def test_the_largest_batch_fits_and_the_next_one_does_not(rec):
    for s in rec.largest:
        if s.batch is not None:
            assert s.fit is not None
            assert s.fit.fits, (s.label, s.batch)
        if s.fail_batch is not None:
            assert s.fail is not None
            assert not s.fail.fits, (s.label, s.fail_batch)
        if s.batch is not None and s.fail_batch is not None:
            assert s.fail_batch == s.batch + 1, (s.label, s.batch, s.fail_batch)
        # every compile is kept, and none contradicts the answer
        for b, p in s.tried.items():
            assert p.fits == (s.batch is not None and b <= s.batch), (s.label, b)


@pytest.mark.parametrize("rec", RECORDS, ids=[f"{t}-{m}" for t, m in BY_KEY])
def test_keeping_more_never_plans_less_memory(rec):
    labels = {p.label for p in rec.plans}
    for more, less in fm.NESTED:
        if more not in labels or less not in labels:
            continue
        kept, dropped = rec.plan(more), rec.plan(less)
        assert not (dropped.error is not None and kept.error is None), (more, less)
        if kept.temp_bytes is not None and dropped.temp_bytes is not None:
            assert kept.temp_bytes >= dropped.temp_bytes, (more, less)
        if kept.error is not None and dropped.error is not None:
            assert kept.error.required_bytes >= dropped.error.required_bytes, (more, less)


def test_a_compiler_out_of_memory_error_is_kept_verbatim():
    errors = [p.error for r in RECORDS for p in r.plans if p.error is not None]
    assert errors, "the page shows at least one compiler out-of-memory error"
    for e in errors:
        assert "RESOURCE_EXHAUSTED" in e.message
        assert "CompileTimeHbmOom" in e.message
        assert e.required_bytes > e.available_bytes


def test_the_tables_have_a_row_per_policy_and_say_where_the_plans_came_from():
    for r in RECORDS:
        table = fit.plans_table(r)
        assert [row[0] for row in table.rows] == [f"`{p.label}`" for p in r.plans]
        for row, p in zip(table.rows, r.plans, strict=True):
            assert row[-1] == fit.verdict(p)
        assert r.runinfo["jax"] in fit.source(r)
        assert r.target["device_kind"] in fit.source(r)
        if r.largest:
            assert len(fit.largest_table(r).rows) == len(r.largest)


def test_the_explorer_plan_is_for_the_config_of_the_measured_record():
    path = fit.PLANS / "explorer-h100.json"
    if not path.exists():
        pytest.skip("explorer-h100.json not recorded")
    plans, _info = plan_records.load(path)
    measured = explorer_data.load(explorer_data.RUNS / "nvidia-h100.json")
    table = fit.explorer_table(plans, measured)
    assert {p.label for p in plans.plans} == set(fit.EXPLORER_POLICIES)
    assert len(table.rows) == len(fit.EXPLORER_POLICIES)
    assert all(p.device_kind == measured.runinfo["device"] for p in plans.plans)


# --- the recorder, on the CPU target --------------------------------------------------------------


@needs_set_mesh
def test_the_cpu_target_plans_less_memory_with_nothing_saveable():
    none = fit.compile_step(fm.DEMO, "cpu", "no remat", 2)
    nothing = fit.compile_step(fm.DEMO, "cpu", "nothing_saveable", 2)
    assert nothing.temp_bytes < none.temp_bytes
    assert none.alias_bytes > 0  # parameters and Adam's state are donated


@needs_set_mesh
def test_the_recorder_writes_a_record_it_can_read_and_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.setitem(fm.CONFIGS, "demo", fm.DEMO)
    out = tmp_path / "fit-cpu-demo.json"
    argv = ["--target", "cpu", "--config", "demo", "--batch", "2",
            "--policies", "nothing_saveable", "--out", str(out)]  # fmt: skip
    assert fit.main(argv) == 0
    rec = fit.load(out)
    assert rec.plan("nothing_saveable").fits
    assert rec.model["params"] == fm.param_count(fm.DEMO)
    assert json.loads(out.read_text())["schema"] == fit.SCHEMA
    with pytest.raises(SystemExit):
        fit.main(argv)  # the file exists


def test_an_unknown_policy_is_refused_with_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        fit.main(["--target", "cpu", "--config", "1b", "--policies", "full", "--out", "x.json"])
    assert "unknown policy 'full'; known: 'no remat'" in capsys.readouterr().err


def test_a_record_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "fit-bad.json"
    path.write_text(json.dumps({"schema": "something/else", "runinfo": {}}))
    with pytest.raises(fit.FitRecordError, match=r"fit-bad\.json: schema is 'something/else'"):
        fit.load(path)


# --- the page's claims ----------------------------------------------------------------------------


def test_the_gpu_compiler_returns_a_plan_over_memory_and_the_tpu_compiler_refuses():
    gpu = next(r for r in RECORDS if r.target["platform"] == "cuda")
    none = gpu.plan("no remat")
    assert none.error is None
    assert not none.fits
    assert none.total_bytes > none.memory_bytes
    for r in RECORDS:
        if r.target["platform"] == "tpu":
            for p in r.plans:
                assert p.fits or p.error is not None, (r.target["name"], p.label)


def test_no_policy_changes_the_arguments_of_the_step():
    for r in RECORDS:
        sizes = {p.argument_bytes for p in r.plans if p.argument_bytes is not None}
        assert len(sizes) <= 1, (r.target["name"], sizes)


def test_the_tpu_refusal_names_less_memory_than_the_chip_has():
    _, oom = fit.first_error(RECORDS)
    assert oom.error.available_bytes < oom.memory_bytes


def test_near_the_limit_the_gpu_plan_without_remat_counts_more_flops_per_sequence():
    gpu = next(r for r in RECORDS if r.target["platform"] == "cuda")
    near = next(s for s in gpu.largest if s.label == "no remat")
    per_seq = {b: p.flops / b for b, p in near.tried.items()}
    fitting = [per_seq[b] for b in near.tried if b <= near.batch]
    assert max(fitting) / min(fitting) < 1.01  # the same work per sequence while it fits
    assert per_seq[near.fail_batch] > 1.2 * per_seq[near.batch]  # more once over memory
    assert not near.fail.fits
    assert near.fail.error is None  # the GPU compiler returns the plan
