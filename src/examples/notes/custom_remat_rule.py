"""A rematerialization rule of a function's own (``docs/notes/jax-remat3.md``):
``jax.custom_vjp.defremat`` on ``jnp.sin``, which keeps the cosine instead of the input, run
inside and outside ``jax.checkpoint`` under each setting of ``jax_custom_vjp3`` and
``jax_remat3`` (jax 0.12; a release without ``defremat`` gets one row that says so).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from examples.notes.remat3_check import remat3_flag as remat3
from examples.tools.display import Table
from examples.tools.jaxprs import config_value
from examples.tools.residuals import Residuals, saved_residuals

#: The config option of the ``custom_vjp`` implementation that custom remat rules need.
CUSTOM_VJP3 = "jax_custom_vjp3"


def custom_rule_available() -> bool:
    """Whether this JAX has ``jax.custom_vjp.defremat`` and the options it needs (jax 0.12)."""
    return hasattr(jax.custom_vjp, "defremat") and hasattr(jax.config, CUSTOM_VJP3)


@contextlib.contextmanager
def custom_vjp3_flag(enabled: bool) -> Iterator[None]:
    """Set ``jax_custom_vjp3`` inside the block; put back the value found on entry."""
    with config_value(CUSTOM_VJP3, enabled):
        yield


def sin_keeping_its_cosine() -> Callable[[jax.Array], jax.Array]:
    """``jnp.sin`` with a rematerialization rule of its own: keep the cosine, not the input.

    ``fwd`` runs on the forward pass and returns the output and what to keep; ``rem`` runs on
    the backward pass, from what was kept and the arguments, and returns the output and what
    ``bwd`` reads; ``bwd`` is the backward rule.
    """
    if not custom_rule_available():
        raise NotImplementedError(
            f"jax {jax.__version__} has no jax.custom_vjp.defremat (jax 0.12 has it; jax 0.11.2 "
            "had jax.custom_remat instead)"
        )

    @jax.custom_vjp
    def sin(x: jax.Array) -> jax.Array:
        return jnp.sin(x)

    def fwd(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.sin(x), jnp.cos(x)

    def rem(cos_x: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jnp.sin(x), cos_x

    def bwd(cos_x: jax.Array, g: jax.Array) -> tuple[jax.Array]:
        return (g * cos_x,)

    sin.defremat(fwd, rem, bwd)
    return sin


@dataclasses.dataclass(frozen=True)
class CustomRuleRun:
    """``sum(sin(sin(x)))`` with :func:`sin_keeping_its_cosine`, under one setting of the flags."""

    setting: str
    kept: str  #: what the forward pass keeps, or the error JAX raised
    gradient_error: float | None  #: largest difference from ``cos(sin x) cos x``, float64


def custom_rule_runs(x: jax.Array | None = None) -> list[CustomRuleRun]:
    """The rule inside ``jax.checkpoint`` (``nothing_saveable``) under each flag setting, and
    without a checkpoint; each gradient against the derivative by hand in NumPy float64. On a
    release without ``defremat``, one row that says so (a downloaded notebook runs on)."""
    x = jnp.linspace(0.1, 1.0, 3) if x is None else x
    reference = np.cos(np.sin(np.float64(x))) * np.cos(np.float64(x))
    try:
        sin = sin_keeping_its_cosine()
    except NotImplementedError as error:
        return [CustomRuleRun(f"jax {jax.__version__}", f"not run: {error}", None)]

    def twice(x: jax.Array) -> jax.Array:
        return jnp.sum(sin(sin(x)))

    settings = [
        ("jax.checkpoint, both flags off", jax.checkpoint(twice), False, False),
        ("jax.checkpoint, jax_custom_vjp3 only", jax.checkpoint(twice), True, False),
        ("jax.checkpoint, jax_custom_vjp3 and jax_remat3", jax.checkpoint(twice), True, True),
        ("no checkpoint, jax_custom_vjp3", twice, True, False),
    ]
    runs = []
    for setting, fn, vjp3, rem3 in settings:
        with custom_vjp3_flag(vjp3), remat3(rem3):
            try:
                listing = saved_residuals(fn, x)
                gradient = np.asarray(jax.grad(fn)(x), np.float64)
            except NotImplementedError as error:
                runs.append(CustomRuleRun(setting, f"{type(error).__name__}: {error}", None))
                continue
        kept = _kept_briefly(listing)
        runs.append(CustomRuleRun(setting, kept, float(np.max(np.abs(gradient - reference)))))
    return runs


def _kept_briefly(listing: Residuals) -> str:
    """``"2 × f32[3] output of cos"``: each kind of kept value once, with its count."""
    counts = collections.Counter(
        f"{r.type_str} {'output of' if r.kind == 'output' else r.kind} {r.detail}" for r in listing
    )
    return ", ".join(f"{n} × {what}" for what, n in counts.items()) or "nothing"


def custom_rule_table(runs: list[CustomRuleRun]) -> Table:
    return Table(
        ["setting", "kept for the backward pass", "gradient error (float64 reference)"],
        [
            (
                r.setting,
                r.kept,
                "n/a" if r.gradient_error is None else f"{r.gradient_error:.1e}",
            )
            for r in runs
        ],
    )
