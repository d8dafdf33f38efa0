"""examples.howto.fit_record: the recorder of "Will it fit?", on the CPU target (whose compiler
is always installed), and the explorer's plan it recorded."""

from __future__ import annotations

import json

import jax
import pytest

from examples.explorer import data as explorer_data
from examples.howto import fit, fit_record
from examples.howto import fit_model as fm
from examples.tools import plan_records

#: The tests that compile the decoder's step (jax.set_mesh constrains its activations).
needs_set_mesh = pytest.mark.skipif(
    not hasattr(jax, "set_mesh"), reason=f"jax {jax.__version__} has no jax.set_mesh"
)


def test_the_explorer_plan_is_for_the_config_of_the_measured_record():
    path = fit.PLANS / "explorer-h100.json"
    if not path.exists():
        pytest.skip("explorer-h100.json not recorded")
    plans, _info = plan_records.load(path)
    measured = explorer_data.load(explorer_data.RUNS / "nvidia-h100.json")
    table = fit.explorer_table(plans, measured, _info["jax"])
    assert table.caption.startswith("Plans")
    assert {p.label for p in plans.plans} == set(fit_record.EXPLORER_POLICIES)
    assert len(table.rows) == len(fit_record.EXPLORER_POLICIES)
    assert all(p.device_kind == measured.runinfo["device"] for p in plans.plans)


@needs_set_mesh
def test_the_cpu_target_plans_less_memory_with_nothing_saveable():
    none = fit_record.compile_step(fm.DEMO, "cpu", "no remat", 2)
    nothing = fit_record.compile_step(fm.DEMO, "cpu", "nothing_saveable", 2)
    assert nothing.temp_bytes < none.temp_bytes
    assert none.alias_bytes > 0  # parameters and Adam's state are donated


@needs_set_mesh
def test_the_recorder_writes_a_record_it_can_read_and_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.setitem(fm.CONFIGS, "demo", fm.DEMO)
    out = tmp_path / "fit-cpu-demo.json"
    argv = ["--target", "cpu", "--config", "demo", "--batch", "2",
            "--policies", "nothing_saveable", "--out", str(out)]  # fmt: skip
    assert fit_record.main(argv) == 0
    rec = fit.load(out)
    assert rec.plan("nothing_saveable").fits
    assert rec.model["params"] == fm.param_count(fm.DEMO)
    assert json.loads(out.read_text())["schema"] == fit.SCHEMA
    with pytest.raises(SystemExit):
        fit_record.main(argv)  # the file exists


def test_an_unknown_policy_is_refused_with_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        fit_record.main(
            ["--target", "cpu", "--config", "1b", "--policies", "full", "--out", "x.json"]
        )
    assert "unknown policy 'full'; known: 'no remat'" in capsys.readouterr().err
