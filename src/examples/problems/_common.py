"""What the three problems share: their spec, and the checks that look past the forward value.

A gradient-checkpointing solution and a plain one compute the same numbers; they differ only in
what the forward pass keeps for the backward pass. So besides the value and the gradient, every
problem here checks the *structure* of the learner's function:

- ``remat``: the traced jaxpr holds JAX's checkpoint primitive (``remat2`` in the JAX releases this
  guide was tested on, possibly ``checkpoint`` later; it is found by its parameters, not its name)
  around both matrix products, looking inside ``jit``, ``custom_jvp`` and other nested jaxprs;
- ``policy``: that primitive's ``policy`` parameter is the required one, compared by identity or
  equality and by behaviour (what it keeps on a probe function with and without batch dimensions);
- ``residuals``: what ``jax.vjp`` of the learner's function keeps (from
  :func:`examples.residuals.saved_residuals`) is what the reference solution keeps.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.jaxprs import RematSite, remat_sites
from examples.residuals import Residuals, saved_residuals

# --- the spec -------------------------------------------------------------------------------------


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
    """Everything the pages and the checker know about one problem."""

    name: str  #: the function's name, also the checker's PROBLEM argument
    title: str
    topic: str
    difficulty: str
    arg_names: tuple[str, ...]  #: ("w1", "w2", "x")
    returns: str  #: a sentence on the output
    page: str  #: the page's document name, "problems/checkpoint_dot_policy"
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

    @property
    def signature(self) -> str:
        """``"checkpoint_dot_policy(w1, w2, x)"``"""
        return f"{self.name}({', '.join(self.arg_names)})"

    @property
    def policy_label(self) -> str:
        return policy_name(self.required_policy)

    def checks(self, fn: Callable[..., Any], cases: Sequence[Case]) -> list[Check]:
        """This problem's checks of ``fn`` on ``cases`` (see :func:`standard_checks`)."""
        return standard_checks(self, fn, cases)

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


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    passed: bool
    detail: str
    #: a failed fatal check (the function does not run, or returns the wrong shape) makes the
    #: later checks meaningless, so the checker stops there
    fatal: bool = False


# --- float32 inputs from a NumPy generator --------------------------------------------------------


def normal(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0) -> jax.Array:
    return jnp.asarray(rng.standard_normal(shape) * scale, dtype=jnp.float32)


def away_from_kinks(pre_activations: Sequence[np.ndarray], margin: float = 1e-3) -> bool:
    """True if no ReLU input is so near 0 that float32 and float64 could disagree on its sign."""
    return all(np.min(np.abs(h)) > margin for h in pre_activations)


# --- policies -------------------------------------------------------------------------------------

_POLICY_NAMES = (
    "dots_with_no_batch_dims_saveable",
    "dots_saveable",
    "nothing_saveable",
    "everything_saveable",
    "offload_dot_with_no_batch_dims",
)


def policy_name(policy: Any) -> str:
    """``jax.checkpoint_policies.NAME`` for a named policy, else the object's repr."""
    if policy is None:
        return "none (JAX's default: keep nothing)"
    for name in _POLICY_NAMES:
        known = getattr(jax.checkpoint_policies, name, None)
        if known is not None and _same_object(policy, known):
            return name
    return repr(policy)


def _same_object(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def _probe(a: jax.Array, b: jax.Array, c: jax.Array) -> jax.Array:
    """A product without batch dimensions, one with a batch dimension, and elementwise work."""
    plain = a @ b
    batched = jnp.einsum("bij,bjk->bik", c, jnp.broadcast_to(b, (c.shape[0], *b.shape)))
    return jnp.sum(jnp.sin(plain)) + jnp.sum(jnp.cos(batched))


def policy_behaviour(policy: Any) -> tuple[tuple[str, str | None], ...]:
    """What ``jax.checkpoint(probe, policy=policy)`` keeps: (type, primitive) per computed value.

    The probe has a matrix product without batch dimensions, one with a batch dimension, and
    elementwise functions, so it tells apart the policies a learner is likely to reach for.
    """
    a = jnp.ones((3, 4), jnp.float32)
    b = jnp.ones((4, 5), jnp.float32)
    c = jnp.ones((2, 3, 4), jnp.float32)
    listing = saved_residuals(jax.checkpoint(_probe, policy=policy), a, b, c)
    return tuple(sorted((r.type_str, r.detail) for r in listing.excluding_arguments()))


def compare_policy(found: Any, required: Any) -> tuple[bool, str]:
    """Whether ``found`` is the required policy, by identity/equality or by behaviour."""
    wanted = policy_name(required)
    if found is None and required is None:
        return True, wanted
    if found is not None and required is not None and _same_object(found, required):
        return True, f"{wanted} (the same policy object)"
    try:
        same = policy_behaviour(found) == policy_behaviour(required)
    except Exception as err:  # a hand-written policy that JAX cannot use
        return False, f"the policy {policy_name(found)} fails on a probe function: {err}"
    if same:
        return True, (
            f"{policy_name(found)}: another object, but it keeps exactly what {wanted} keeps on "
            "a probe with batched and unbatched products"
        )
    return False, f"found {policy_name(found)}; the problem asks for {wanted}"


# --- residuals ------------------------------------------------------------------------------------


def residual_listing(fn: Callable[..., Any], *arrays: Any) -> Residuals:
    """``saved_residuals`` with ``jit`` inlined, so a jitted solution lists what it keeps inside."""
    with jax.disable_jit():
        return saved_residuals(fn, *arrays)


def residual_signature(listing: Residuals) -> collections.Counter[tuple[str, str, str | None]]:
    """(kind, type, primitive or name) of each value; argument names and source lines dropped."""
    return collections.Counter(
        (r.kind, r.type_str, r.detail if r.kind in ("output", "named") else None) for r in listing
    )


def describe_computed(listing: Residuals) -> str:
    computed = collections.Counter(
        f"{r.detail or r.kind} {r.type_str}" for r in listing.excluding_arguments()
    )
    if not computed:
        return "nothing it computed (only its inputs)"
    return ", ".join(what + (f" ×{n}" if n > 1 else "") for what, n in sorted(computed.items()))


# --- numbers --------------------------------------------------------------------------------------


def max_error(actual: Any, expected: np.ndarray) -> tuple[float, float]:
    """(max abs error, the allowed bound's scale: max abs expected value)."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    return float(np.max(np.abs(a - e), initial=0.0)), float(np.max(np.abs(e), initial=0.0))


def signature_text(fn: Callable[..., Any]) -> str:
    try:
        names = ", ".join(inspect.signature(fn).parameters)
        return f"{fn.__name__}({names})"
    except (TypeError, ValueError, AttributeError):
        return repr(fn)


# --- the checks -----------------------------------------------------------------------------------

#: A check: its name, whether failing it stops the run, and what it does: returns (passed, detail).
Check = tuple[str, bool, Callable[[], tuple[bool, str]]]


def standard_checks(problem: Problem, fn: Callable[..., Any], cases: Sequence[Case]) -> list[Check]:
    """The checks every problem runs, in order; the fatal ones come first.

    Each one calls the learner's ``fn`` (so each may raise, or hang: the checker handles both).
    """
    outputs: list[Any] = []
    first = cases[0]

    def signature() -> tuple[bool, str]:
        try:
            inspect.signature(fn).bind(*first.args)
        except TypeError as err:
            return False, (f"{signature_text(fn)} cannot be called as {problem.signature}: {err}")
        except ValueError:  # no signature to read (a C function, say): the call will tell
            pass
        return True, signature_text(fn)

    def runs() -> tuple[bool, str]:
        outputs.clear()
        for case in cases:
            outputs.append(problem.call(fn, case))
        return True, f"on {len(cases)} inputs: " + "; ".join(c.label for c in cases)

    def shape() -> tuple[bool, str]:
        for case, out in zip(cases, outputs, strict=True):
            want = problem.output_shape(case)
            got = np.shape(out)
            if got != want:
                return False, f"expected shape {want} for {case.label}, got {got}"
        shapes = sorted({problem.output_shape(c) for c in cases})
        return True, "as expected: " + ", ".join(str(s) for s in shapes)

    def dtype() -> tuple[bool, str]:
        for case, out in zip(cases, outputs, strict=True):
            kind = getattr(out, "dtype", None)
            if kind is None:
                return False, (
                    f"returned a {type(out).__name__} for {case.label}, not an array; "
                    "return the JAX array itself (no float(), .item() or .tolist())"
                )
            if np.dtype(kind) != np.float32:
                return False, f"expected float32 (the inputs' dtype), got {np.dtype(kind)}"
        return True, "float32, like the inputs"

    def finite() -> tuple[bool, str]:
        for case, out in zip(cases, outputs, strict=True):
            values = np.asarray(out, dtype=np.float64)
            if np.isnan(values).any():
                return False, f"the output contains NaN for {case.label}"
            if np.isinf(values).any():
                return False, f"the output contains inf for {case.label}"
        return True, "no NaN or inf"

    def value() -> tuple[bool, str]:
        worst = 0.0
        for case, out in zip(cases, outputs, strict=True):
            err, scale = max_error(out, case.expected)
            allowed = problem.atol + problem.rtol * scale
            if err > allowed:
                return False, (
                    f"differs from the float64 reference for {case.label}: max abs error "
                    f"{err:.3g} > allowed {allowed:.3g}"
                )
            worst = max(worst, err / allowed)
        return True, f"matches the float64 reference (worst error {worst:.2g} of the tolerance)"

    def gradient() -> tuple[bool, str]:
        worst = 0.0
        for case in cases:
            g, arrays = problem.on_arrays(fn, case)
            cotangent = jnp.asarray(case.cotangent, jnp.float32)

            def weighted(*values: Any, g: Callable[..., Any] = g, ct: Any = cotangent) -> Any:
                return jnp.sum(g(*values) * ct)

            grads = jax.grad(weighted, argnums=tuple(range(len(arrays))))(*arrays)
            for i, (got, want) in enumerate(zip(grads, case.expected_grads, strict=True)):
                err, scale = max_error(got, want)
                allowed = problem.atol + problem.rtol * scale
                if err > allowed:
                    arg = problem.arg_names[problem.array_args[i]]
                    return False, (
                        f"the gradient with respect to {arg} differs from the float64 "
                        f"reference for {case.label}: max abs error {err:.3g} > allowed "
                        f"{allowed:.3g}"
                    )
                worst = max(worst, err / allowed)
        return True, f"matches the float64 reference (worst error {worst:.2g} of the tolerance)"

    def traced_sites() -> list[RematSite]:
        g, arrays = problem.on_arrays(fn, first)
        return remat_sites(jax.make_jaxpr(g)(*arrays).jaxpr)

    def remat() -> tuple[bool, str]:
        sites = traced_sites()
        if not sites:
            return False, (
                "no checkpoint in the traced function: the value is right, but nothing tells JAX "
                "to recompute anything on the backward pass"
            )
        covering = [s for s in sites if s.products >= problem.products_inside]
        if not covering:
            most = max(s.products for s in sites)
            return False, (
                f"a checkpoint ({sites[0].primitive}) is there, but the largest one surrounds "
                f"{most} of the {problem.products_inside} matrix products; wrap the whole "
                "computation"
            )
        detail = (
            f"{covering[0].primitive} surrounds {covering[0].products} matrix products "
            f"({len(sites)} checkpoint equation{'s' if len(sites) != 1 else ''} in the trace)"
        )
        if max(s.depth for s in sites) > 0:
            detail += "; note: a checkpoint is nested inside another, one level is enough"
        return True, detail

    def policy() -> tuple[bool, str]:
        covering = [s for s in traced_sites() if s.products >= problem.products_inside]
        if not covering:
            return False, "no checkpoint around the computation, so no policy either"
        results = [compare_policy(s.policy, problem.required_policy) for s in covering]
        for ok, detail in results:
            if not ok:
                return False, detail
        return True, results[0][1]

    def residuals() -> tuple[bool, str]:
        g, arrays = problem.on_arrays(fn, first)
        mine = residual_listing(g, *arrays)
        ref_g, ref_arrays = problem.on_arrays(problem.reference, first)
        theirs = residual_listing(ref_g, *ref_arrays)
        if residual_signature(mine) == residual_signature(theirs):
            return True, (f"keeps {describe_computed(mine)}, as the reference does ({first.label})")
        return False, (
            f"the backward pass would keep {describe_computed(mine)}; the reference keeps "
            f"{describe_computed(theirs)} ({first.label})"
        )

    return [
        ("signature", True, signature),
        ("runs", True, runs),
        ("shape", True, shape),
        ("dtype", True, dtype),
        ("finite", True, finite),
        ("value", False, value),
        ("gradient", False, gradient),
        ("remat", False, remat),
        ("policy", False, policy),
        ("residuals", False, residuals),
    ]
