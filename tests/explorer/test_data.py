"""examples.explorer.data: JSON round trips, malformed files rejected clearly, committed runs."""

from __future__ import annotations

import json

import pytest
from explorer._helpers import DATA, TINY, _result

from examples import explorer as e
from examples.explorer.render import MEDIAN_ONLY
from examples.tools.measure import Timing
from examples.tools.runinfo import collect


def test_json_round_trip(tmp_path, results, depth):
    run = e.Run(collect().as_dict(), TINY, list(results.values()), depth)
    path = tmp_path / "run.json"
    e.save(run, path)
    assert e.load(path) == run
    assert e.load_all(tmp_path) == [run]
    assert run.runinfo["device"] in run.label()
    assert run.runinfo["jax"] in run.label()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="other/1"), "schema is 'other/1', expected one of"),
        (lambda d: d.pop("schema"), "schema is None"),
        (lambda d: d.pop("results"), "'results' must be a list"),
        (lambda d: d["results"][0].pop("temp_bytes"), "results[0]: missing temp_bytes"),
        (lambda d: d["runinfo"].pop("device"), "runinfo lacks 'device'"),
        (lambda d: d["config"].update(heads=3), "not divisible"),
    ],
)
def test_malformed_files_are_rejected_clearly(tmp_path, results, mutate, message):
    data = e.Run(collect().as_dict(), TINY, list(results.values()), []).to_json()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(e.ExplorerDataError, match="bad.json: .*" + _escape(message)):
        e.load(path)


def _escape(text: str) -> str:
    return text.replace("[", r"\[").replace("]", r"\]")


def test_not_json_is_rejected(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(e.ExplorerDataError, match=r"bad\.json: not JSON"):
        e.load(path)


# --- schema versions: spreads recorded (2) or not (1) ---------------------------------------------


def test_timed_run_round_trips_with_its_spread(tmp_path):
    results = [
        _result(e.NO_REMAT, 0.010, 0.009, 0.012),
        _result("nothing_saveable", 0.02, 0.019, 0.03),
    ]
    run = e.Run(collect().as_dict(), TINY, results, [])
    e.save(run, tmp_path / "run.json")
    back = e.load(tmp_path / "run.json")
    assert back == run
    assert back.schema_version == 2
    assert back.results[0].timing == Timing(0.010, 0.009, 0.012, 7)
    assert json.loads((tmp_path / "run.json").read_text())["schema"] == e.SCHEMA


def test_save_never_overwrites(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("keep me")
    run = e.Run(collect().as_dict(), TINY, [_result(e.NO_REMAT)], [])
    with pytest.raises(FileExistsError, match="not overwriting"):
        e.save(run, path)
    assert path.read_text() == "keep me"


def _committed_gpu_runs():
    return [r for r in e.load_all(DATA) if r.runinfo["backend"] == "gpu"]


def test_committed_h100_file_loads_as_schema_1_without_spread():
    (run,) = [r for r in _committed_gpu_runs() if r.runinfo["device"].startswith("NVIDIA H100")]
    assert run.schema_version == 1
    assert all(r.step_time_s is not None and r.timing is None for r in run.results)
    assert not any(r.spread_recorded for r in run.results)
    # Its step-time cells say so, no ordering is claimed from it, and its plot panel is marked.
    table = e.results_table(run.results, run.config)
    assert all(MEDIAN_ONLY in cell for cell in table.column(table.header[-1]))
    assert e.timing_verdicts(run.results) is None
    assert "cannot tell a difference from noise" in e.ordering_sentence(run.results)
    assert "cannot choose" in e.budget_sentence(run.results, 10**12)
    # A version-1 run written back stays version 1.
    assert run.to_json()["schema"] == "jax-remat-guide/explorer/1"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("step_time_min_s"), "missing step_time_min_s"),
        (lambda r: r.update(step_time_s=5.0), "not within its recorded range"),
    ],
)
def test_schema_2_requires_a_consistent_spread(tmp_path, mutate, message):
    run = e.Run(collect().as_dict(), TINY, [_result(e.NO_REMAT, 0.01, 0.009, 0.012)], [])
    data = run.to_json()
    mutate(data["results"][0])
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(e.ExplorerDataError, match=message):
        e.load(tmp_path / "bad.json")


def test_schema_1_rejects_spread_fields(tmp_path):
    data = e.Run(collect().as_dict(), TINY, [_result(e.NO_REMAT, 0.01, 0.009, 0.012)], []).to_json()
    data["schema"] = "jax-remat-guide/explorer/1"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(e.ExplorerDataError, match="belong to schema version 2"):
        e.load(tmp_path / "bad.json")


def test_committed_h200_file_is_schema_2_and_orders_steps_only_by_spread():
    (run,) = [r for r in _committed_gpu_runs() if r.runinfo["device"] == "NVIDIA H200"]
    assert run.schema_version == 2
    assert all(r.timing is not None for r in run.results)
    verdicts = e.timing_verdicts(run.results)
    assert verdicts is not None
    assert set(verdicts) == {r.policy for r in run.results} - {e.NO_REMAT}
    assert "with an ordering claimed only where" in e.ordering_sentence(run.results)


@pytest.mark.parametrize("run", _committed_gpu_runs(), ids=lambda r: r.runinfo["device"])
def test_committed_gpu_run_moves_offloaded_bytes_to_the_host(run):
    rows = {r.policy: r for r in run.results}
    offloaded = rows[e.OFFLOAD_POLICIES[0]]
    assert offloaded.temp_bytes < rows["save_only_these_names(mlp_hidden)"].temp_bytes
    assert offloaded.host_temp_bytes > 0
