"""Measurements recorded on other machines (a GPU, say), committed as data files.

The explorer's policy runs, the offload runs and the JAX release matrix are each written by a
command on the machine that measured them and committed under ``src/examples/data/KIND/``. The
files ship with the package, so a page shows them wherever it runs: in the site's build, and in a
downloaded notebook that installed the package's wheel.

This module does what every kind of record shares: where the files are, reading one with a
schema check and errors that name the file and the problem, turning its parts into dataclasses,
and writing a new one without ever replacing a file. Nothing here needs JAX.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_D = TypeVar("_D", bound="DataclassInstance")
_R = TypeVar("_R")

#: The folder of the committed records, inside the installed package.
DATA = Path(__file__).resolve().parents[1] / "data"
#: What a record's ``runinfo`` must name (see :mod:`examples.tools.runinfo`).
RUNINFO_KEYS = ("device", "backend", "jax")


class RecordError(ValueError):
    """A data file that is not what the command that writes its kind would have written."""


def folder(kind: str) -> Path:
    """Where the records of one kind are committed: ``src/examples/data/KIND``."""
    return DATA / kind


def read(
    path: str | Path,
    schemas: Mapping[str, int],
    error: type[RecordError] = RecordError,
    fields: Mapping[str, type] = {},
) -> tuple[dict[str, Any], int]:
    """Read a record: its JSON object and its schema version.

    Checks that the file is JSON, that its ``schema`` is one of ``schemas`` (name -> version), that
    ``runinfo`` names the device, backend and jax release, and that each key of ``fields`` holds a
    value of that type. Errors are ``error`` with the file's name and the problem.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise error(f"{path.name}: not JSON ({err})") from err
    found = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(found, str) or found not in schemas:
        expected = ", ".join(map(repr, schemas))
        expected = f"one of {expected}" if len(schemas) > 1 else expected
        raise error(f"{path.name}: schema is {found!r}, expected {expected}")
    info = data.get("runinfo")
    if not isinstance(info, dict):
        raise error(f"{path.name}: 'runinfo' must be an object")
    for key in RUNINFO_KEYS:
        if key not in info:
            raise error(f"{path.name}: runinfo lacks '{key}'")
    for key, kind in fields.items():
        if not isinstance(data.get(key), kind):
            raise error(f"{path.name}: '{key}' must be a {kind.__name__}")
    return data, schemas[found]


def build(
    cls: type[_D],
    data: Any,
    where: str,
    error: type[RecordError] = RecordError,
    optional: Iterable[str] = (),
) -> _D:
    """``cls(**data)`` for a dataclass, with an error naming ``where`` and what is wrong."""
    if not isinstance(data, dict):
        raise error(f"{where}: expected an object, found {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in data and n not in set(optional)]
    if missing:
        raise error(f"{where}: missing {', '.join(missing)}")
    try:
        return cls(**{n: data[n] for n in names if n in data})
    except (TypeError, ValueError) as err:
        raise error(f"{where}: {err}") from err


def write_new(path: str | Path, record: Mapping[str, Any]) -> Path:
    """Write ``record`` as JSON to a new file; an existing file is never replaced."""
    path = Path(path)
    text = json.dumps(record, indent=1) + "\n"
    try:
        with path.open("x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        raise FileExistsError(f"{path} exists; not overwriting it (remove it first)") from None
    return path


def load_all(where: str | Path, load: Callable[[Path], _R]) -> list[_R]:
    """``load`` of every ``*.json`` file in the folder ``where``, in name order."""
    return [load(p) for p in sorted(Path(where).glob("*.json"))]


def label(runinfo: Mapping[str, Any]) -> str:
    """``NVIDIA H100 80GB HBM3 (gpu, jax 0.11.2, jaxlib 0.11.2)``: the machine and versions."""
    jaxlib = f", jaxlib {runinfo['jaxlib']}" if "jaxlib" in runinfo else ""
    return f"{runinfo['device']} ({runinfo['backend']}, jax {runinfo['jax']}{jaxlib})"
