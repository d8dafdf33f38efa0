"""examples.reference.release_runs: how each release's run of the matrix went (its tests, the
seconds it took, the machine), as the page shows it."""

from __future__ import annotations

import copy

from reference._helpers import series as release_series

from examples.reference import release_runs


def test_one_row_per_release_with_the_seconds_it_took(record):
    series = release_series(record, [("0.6.2", ("remat3", None)), ("0.7.2", ("remat3", "hi"))])
    assert release_runs.releases_table(series).column("jax") == ["`0.6.2`", "`0.7.2`"]
    assert release_runs.total_seconds(series) == 20.0
    assert release_runs.releases_table(series).column("in all") == ["10 s", "10 s"]


def test_machine_text_names_the_cpus_and_the_load_range(record):
    series = release_series(record, [("0.6.2", ("remat3", None)), ("0.7.2", ("remat3", None))])
    series[1]["machine"] = {**series[1]["machine"], "load_15min": 4.0}
    assert release_runs.machine_text(series) == (
        "2 CPUs (some CPU), 15-minute load average 1.5 to 4.0 as each release finished"
    )
    series[1]["machine"]["load_15min"] = None
    assert release_runs.machine_text(series) == "2 CPUs (some CPU)"


def test_a_problem_on_several_releases_is_one_row_naming_them(record):
    def on(version, skipped):
        data = copy.deepcopy(record)
        data["runinfo"]["jax"] = version
        data["tests"]["skipped"] = [{"test": t, "reason": r} for t, r in skipped]
        return data

    gpu = ("tests/a.py::test_gpu", "needs a CUDA GPU")
    flag = ("tests/b.py::test_flag", "no jax_remat3 flag")
    series = [on("0.5.0", [gpu, flag]), on("0.6.2", [gpu, flag]), on("0.7.2", [gpu])]
    rows = release_runs.problems_table(series, "skipped").rows
    assert [list(map(str, row)) for row in rows] == [
        ["every release", "`tests/a.py::test_gpu`", "needs a CUDA GPU"],
        ["`0.5.0`, `0.6.2`", "`tests/b.py::test_flag`", "no jax_remat3 flag"],
    ]
    # the same test with another reason is another row
    series[2]["tests"]["skipped"].append({"test": "tests/b.py::test_flag", "reason": "flag off"})
    assert len(release_runs.problems_table(series, "skipped").rows) == 3
