"""examples.explorer.__main__: the command line writes a loadable file, refuses bad arguments."""

from __future__ import annotations

import dataclasses

import pytest
from explorer._helpers import TINY

from examples import explorer as e
from examples.explorer.__main__ import main
from examples.tools.runinfo import collect


def test_cli_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("keep me")
    assert main(["--size", "tiny", "--out", str(out)]) == 2
    assert out.read_text() == "keep me"
    assert "not overwriting" in capsys.readouterr().err


def test_cli_rejects_unknown_policies(capsys):
    with pytest.raises(SystemExit):
        main(["--size", "tiny", "--policies", "no remat,nope"])
    assert "unknown policies ['nope']" in capsys.readouterr().err


def test_cli_writes_a_loadable_file(tmp_path):
    out = tmp_path / "r.json"
    argv = ["--size", "tiny", "--layers", "3", "--repeats", "7", "--depths", "2"]
    assert main([*argv, "--policies", "no remat,nothing_saveable", "--out", str(out)]) == 0
    run = e.load(out)
    assert run.config == dataclasses.replace(TINY, layers=3)
    assert [r.policy for r in run.results] == [e.NO_REMAT, "nothing_saveable"]
    assert all(r.step_time_s > 0 for r in run.results)
    assert {(p.policy, p.layers) for p in run.depth} == {(e.NO_REMAT, 2), ("nothing_saveable", 2)}
    assert run.runinfo == collect().as_dict()


def test_cli_refuses_fewer_than_seven_repeats(capsys):
    with pytest.raises(SystemExit):
        main(["--size", "tiny", "--repeats", "3"])
    assert "at least 7 timed calls" in capsys.readouterr().err
