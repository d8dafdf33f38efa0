"""examples.tools.recorded: committed measurement files, read and written the one way."""

from __future__ import annotations

import dataclasses
import json

import pytest

from examples.tools import recorded


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 0


SCHEMAS = {"test/1": 1, "test/2": 2}
RUNINFO = {"device": "cpu", "backend": "cpu", "jax": "0.0", "jaxlib": "0.0"}


def _write(tmp_path, data, name="run.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_read_returns_the_object_and_its_schema_version(tmp_path):
    path = _write(tmp_path, {"schema": "test/2", "runinfo": RUNINFO, "points": []})
    data, version = recorded.read(path, SCHEMAS, fields={"points": list})
    assert version == 2
    assert data["points"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "run.json: not JSON"),
        ([], "run.json: schema is None"),
        (
            {"schema": "test/9", "runinfo": RUNINFO},
            "schema is 'test/9', expected one of 'test/1', 'test/2'",
        ),
        ({"schema": "test/1", "runinfo": []}, "'runinfo' must be an object"),
        (
            {"schema": "test/1", "runinfo": {"device": "cpu", "jax": "0"}},
            "runinfo lacks 'backend'",
        ),
        ({"schema": "test/1", "runinfo": RUNINFO, "points": {}}, "'points' must be a list"),
    ],
)
def test_read_names_the_file_and_the_problem(tmp_path, content, message):
    path = _write(tmp_path, content)

    class Mine(recorded.RecordError):
        pass

    with pytest.raises(Mine, match=message.replace("(", r"\(").replace(")", r"\)")):
        recorded.read(path, SCHEMAS, Mine, fields={"points": list})


def test_build_checks_fields_and_allows_optional_ones():
    assert recorded.build(Point, {"x": 1, "y": 2}, "here") == Point(1, 2)
    with pytest.raises(recorded.RecordError, match="here: missing y"):
        recorded.build(Point, {"x": 1}, "here")
    # A field a schema version may lack takes its default.
    assert recorded.build(Point, {"x": 1}, "here", optional=("y",)) == Point(1, 0)
    with pytest.raises(recorded.RecordError, match="here: missing x"):
        recorded.build(Point, {"y": 1}, "here", optional=("y",))
    with pytest.raises(recorded.RecordError, match="here: expected an object, found list"):
        recorded.build(Point, [1], "here")


def test_write_new_never_replaces_a_file(tmp_path):
    path = recorded.write_new(tmp_path / "a.json", {"schema": "test/1"})
    assert json.loads(path.read_text()) == {"schema": "test/1"}
    with pytest.raises(FileExistsError, match="exists; not overwriting it"):
        recorded.write_new(path, {"schema": "test/2"})
    assert json.loads(path.read_text()) == {"schema": "test/1"}


def test_load_all_reads_json_files_in_name_order(tmp_path):
    for name in ("b.json", "a.json", "notes.txt"):
        _write(tmp_path, {"name": name}, name)
    assert recorded.load_all(tmp_path, lambda p: p.name) == ["a.json", "b.json"]


def test_committed_records_ship_inside_the_package():
    assert recorded.DATA.parent.name == "examples"
    assert (recorded.folder("explorer") / "nvidia-h100.json").is_file()
    assert recorded.label(RUNINFO) == "cpu (cpu, jax 0.0, jaxlib 0.0)"
