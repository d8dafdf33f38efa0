"""What a problem module declares: its :class:`Problem` (the spec) and the inputs it is checked on.

A problem module ``examples/problems/NAME.py`` defines the reference solution ``NAME``, a
``make_cases`` function that draws fresh inputs with their float64 expected values, and
``PROBLEM = Problem(...)`` tying them together. :mod:`examples.problems` finds it by discovery.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Case:
    """One set of inputs, with what a correct solution must return for them (in float64)."""

    args: tuple[Any, ...]  #: positional arguments, exactly as the learner's function receives them
    label: str  #: "N=8, d=4": how the checker names this case
    expected: np.ndarray  #: the float64 reference value
    #: float64 gradients of ``sum(cotangent * f)`` with respect to ``Problem.array_args``
    expected_grads: tuple[np.ndarray, ...]
    cotangent: np.ndarray  #: weights the output for the gradient check (``1.0`` for a scalar)


@dataclasses.dataclass(frozen=True)
class Problem:
    """Everything the pages and the checker know about one problem.

    ``name`` is the problem's id: the learner's function name, the checker's PROBLEM argument,
    the module's name (``examples/problems/NAME.py``) and the page's (``docs/problems/NAME.md``).
    """

    name: str
    #: where the problems index and the checker's list put it (1, 2, 3, ...; unique)
    position: int
    title: str
    topic: str
    difficulty: str
    arg_names: tuple[str, ...]  #: ("w1", "w2", "x")
    returns: str  #: a sentence on the output
    reference: Callable[..., Any]  #: the reference solution (JAX)
    make_cases: Callable[[np.random.Generator], list[Case]]
    #: indices of the arguments that are arrays (the others, seed and features, stay static)
    array_args: tuple[int, ...]
    output_shape: Callable[[Case], tuple[int, ...]]
    #: the policy the checkpoint must carry; ``None`` is JAX's default (keep nothing)
    required_policy: Callable[..., Any] | None
    rtol: float = 1e-5
    atol: float = 1e-6
    #: the remat primitive must surround at least this many matrix products (``dot_general``)
    products_inside: int = 2
    #: the checkpoint must sit in the body of a ``scan`` (one per step: per layer), and no
    #: checkpoint may surround a scan; ``products_inside`` then counts one step's products
    inside_scan: bool = False
    #: values the checkpointed function must name with ``checkpoint_name``, inside the checkpoint
    #: (a names-based policy keeps only values it can see by name); the policy check also tells
    #: policies apart by what they keep of values named so
    names: tuple[str, ...] = ()
    #: the whole function must run inside the checkpoint: no computation outside it (the problem
    #: says "the whole pipeline inside one jax.checkpoint")
    whole_in_checkpoint: bool = False
    #: how the problem's page tells the learner to apply a stack of layers
    scan_call: str = "jax.lax.scan"
    #: said after a wrong value: where the function makes its own parameters, the likeliest
    #: cause (another creation order, another way of drawing the keys)
    value_hint: str = ""

    @property
    def page(self) -> str:
        """The page's document name, ``"problems/checkpoint_dot_policy"``."""
        return f"problems/{self.name}"

    @property
    def signature(self) -> str:
        """``"checkpoint_dot_policy(w1, w2, x)"``"""
        return f"{self.name}({', '.join(self.arg_names)})"

    def call(self, fn: Callable[..., Any], case: Case) -> Any:
        return fn(*case.args)

    def on_arrays(self, fn: Callable[..., Any], case: Case) -> tuple[Callable[..., Any], list[Any]]:
        """``fn`` as a function of the case's array arguments only, with those arrays."""
        arrays = [case.args[i] for i in self.array_args]

        def g(*values: Any) -> Any:
            args = list(case.args)
            for i, value in zip(self.array_args, values, strict=True):
                args[i] = value
            return fn(*args)

        return g, arrays


# --- float32 inputs from a NumPy generator --------------------------------------------------------


def normal(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> jax.Array:
    return jnp.asarray(rng.standard_normal(shape) * scale, dtype=jnp.float32)


def away_from_kinks(pre_activations: Sequence[np.ndarray], margin: float = 1e-3) -> bool:
    """True if no ReLU input is so near 0 that float32 and float64 could disagree on its sign."""
    return all(np.min(np.abs(h)) > margin for h in pre_activations)
