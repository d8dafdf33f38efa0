"""What reverse-mode autodiff saves for a function, as a structured listing.

``jax.ad_checkpoint.print_saved_residuals`` answers the central question of gradient
checkpointing ("what does the forward pass keep for the backward pass?") but it prints free
text, and each line ends in the absolute path of the file that defined the function. On a
hosted page that path would be the build machine's (``/home/...`` or ``/tmp/ipykernel_...``).

This module asks JAX the same question and returns structured records instead: shape, dtype,
what the value is (an argument, a primitive's output, a named value, ...), where in the source it
was made, with a path relative to this package, and how many bytes it occupies. Its printer writes
lines that read exactly like ``print_saved_residuals`` of the newest JAX releases but for the path;
on older releases, which worded some residuals differently, the records still mean the same
(:mod:`examples.tools.compat` translates).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path, PurePath
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from examples.tools import compat
from examples.tools.display import format_bytes

Kind = Literal["argument", "output", "named", "jitted", "literal", "constant"]

_PACKAGE_DIR = Path(__file__).resolve().parents[1]

# "output of sin from /path/to/file.py:7:9 (g)" and its relatives, as JAX words them.
_DESCRIPTIONS: list[tuple[Kind, re.Pattern[str]]] = [
    ("argument", re.compile(r"^from the argument (?P<detail>.+)$")),
    # JAX leaves the source empty where it knows none (e.g. under jax.jit of a checkpoint).
    ("named", re.compile(r"^named '(?P<detail>.*)' from ?(?P<source>.*)$")),
    ("jitted", re.compile(r"^output of jitted function '(?P<detail>.*)' from ?(?P<source>.*)$")),
    ("output", re.compile(r"^output of (?P<detail>\S+) from ?(?P<source>.*)$")),
    ("literal", re.compile(r"^from a literal$")),
    ("constant", re.compile(r"^from a constant$")),
]
_SOURCE = re.compile(r"^(?P<path>.+?):(?P<line>\d+)(?::(?P<col>\d+))? \((?P<func>.*)\)$")
_NOTEBOOK_CELL = re.compile(r"ipykernel_\d+[/\\]\d+\.py$")


@dataclasses.dataclass(frozen=True)
class Residual:
    """One value that the forward pass keeps for the backward pass."""

    shape: tuple[int, ...]
    #: A NumPy dtype, or JAX's extended dtype for a typed PRNG key (``key<fry>``, 8 bytes each).
    dtype: Any
    kind: Kind
    #: The argument's path (``"W1"``, ``"params[0]"``), the primitive (``"sin"``), the
    #: ``checkpoint_name`` or the jitted function's name; ``None`` for literals and constants.
    detail: str | None
    #: ``"examples/tutorial/traced.py:12:9 (g)"``: file, line, column and function; ``None`` for
    #: arguments, literals and constants.
    source: str | None
    #: JAX's short type string, ``"f32[5,4]"`` (``"f32<host>[5,4]"`` in host memory, on the
    #: releases whose abstract values carry a memory space).
    type_str: str
    #: Kept in host memory (an offloading policy), on every release; see
    #: :mod:`examples.tools.compat`.
    on_host: bool = False

    @property
    def nbytes(self) -> int:
        return int(math.prod(self.shape) * self.dtype.itemsize)

    @property
    def argument(self) -> str | None:
        return self.detail if self.kind == "argument" else None

    @property
    def primitive(self) -> str | None:
        return self.detail if self.kind == "output" else None

    @property
    def name(self) -> str | None:
        return self.detail if self.kind == "named" else None

    def describe(self) -> str:
        """The line ``print_saved_residuals`` would print, with a package-relative path."""
        source = self.source or ""
        what = {
            "argument": f"from the argument {self.detail}",
            "output": f"output of {self.detail} from {source}",
            "named": f"named '{self.detail}' from {source}",
            "jitted": f"output of jitted function '{self.detail}' from {source}",
            "literal": "from a literal",
            "constant": "from a constant",
        }[self.kind]
        return f"{self.type_str} {what}"


class Residuals(tuple[Residual, ...]):
    """The residuals of one function, in JAX's order, with totals."""

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self)

    def of_kind(self, kind: Kind) -> Residuals:
        return Residuals(r for r in self if r.kind == kind)

    def excluding_arguments(self) -> Residuals:
        """What the forward pass computed and kept (arguments are alive anyway)."""
        return Residuals(r for r in self if r.kind != "argument")

    def summary(self) -> str:
        computed = self.excluding_arguments()
        return (
            f"{_count(len(self), 'residual')}, {format_bytes(self.nbytes)}; "
            f"{len(computed)} computed on the forward pass, {format_bytes(computed.nbytes)}"
        )

    def __str__(self) -> str:
        return "\n".join(r.describe() for r in self)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def relative_source(source: str) -> str:
    """Rewrite the path in ``"PATH:LINE:COL (FUNC)"`` so that it names no build machine.

    Files of this package become ``examples/...``, a notebook cell becomes ``<cell>``, and any
    other file is named by its base name alone.
    """
    match = _SOURCE.match(source)
    if match is None:  # "unknown", or a format this module does not know: keep, minus folders
        return source
    path = match["path"]
    location = source[match.end("path") :]
    return _relative_path(path) + location


def _relative_path(path: str) -> str:
    if _NOTEBOOK_CELL.search(path):
        return "<cell>"
    try:
        inside = Path(path).resolve().relative_to(_PACKAGE_DIR)
    except (ValueError, OSError):
        return PurePath(path).name
    return f"{_PACKAGE_DIR.name}/{inside.as_posix()}"


def _parse(
    type_str: str, shape: tuple[int, ...], dtype: Any, description: str, on_host: bool = False
) -> Residual:
    for kind, pattern in _DESCRIPTIONS:
        match = pattern.match(description)
        if match is not None:
            groups = match.groupdict()
            source = groups.get("source")
            return Residual(
                shape=tuple(shape),
                dtype=dtype if jnp.issubdtype(dtype, jax.dtypes.extended) else np.dtype(dtype),
                kind=kind,
                detail=groups.get("detail"),
                source=relative_source(source) if source else None,
                type_str=type_str,
                on_host=on_host,
            )
    raise ValueError(
        f"examples.tools.residuals does not understand JAX's residual description {description!r}; "
        "the installed JAX may word it differently from the versions this package was tested on"
    )


def saved_residuals(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Residuals:
    """The values ``jax.vjp(f, *args, **kwargs)`` keeps for the backward pass.

    Described as the newest JAX releases describe them, on every supported release (older ones
    listed a kept matrix product as ``output of reduce_precision``; see
    :mod:`examples.tools.compat`).
    """
    listing = compat.saved_residuals(f, *args, **kwargs)
    return Residuals(
        _parse(aval.str_short(short_dtypes=True), aval.shape, aval.dtype, description, on_host)
        for aval, description, on_host in listing
    )


_SITE_POLICY: Any = object()


def checkpoint_function(site: Any) -> tuple[Callable[..., Any], list[jax.ShapeDtypeStruct]]:
    """The function one checkpoint of a traced function wraps, and abstract inputs for it.

    ``site`` is an :class:`examples.tools.jaxprs.RematSite`; its jaxpr becomes a function again.
    """
    from jax.extend import core as jex_core

    from examples.tools.jaxprs import ClosedJaxpr

    inner = site.jaxpr
    closed = inner if isinstance(inner, ClosedJaxpr) else ClosedJaxpr(inner, ())
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in closed.in_avals]
    return jex_core.jaxpr_as_fun(closed), avals


def checkpoint_residuals(site: Any, policy: Any = _SITE_POLICY) -> Residuals:
    """What one checkpoint of a traced function keeps on its own, under its policy or ``policy``
    (:func:`checkpoint_function`, checkpointed again; ``policy=None`` keeps nothing)."""
    fn, avals = checkpoint_function(site)
    chosen = site.policy if policy is _SITE_POLICY else policy
    return saved_residuals(jax.checkpoint(fn, policy=chosen), *avals)


def print_residuals(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Residuals:
    """Print what ``print_saved_residuals`` prints, minus machine paths; return the listing."""
    listing = saved_residuals(f, *args, **kwargs)
    print(listing)
    return listing


def total_bytes(residuals: Iterable[Residual]) -> int:
    return sum(r.nbytes for r in residuals)
