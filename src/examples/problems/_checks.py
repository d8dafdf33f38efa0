"""The checks every problem runs: the value, and the structure that the value cannot show.

A gradient-checkpointing solution and a plain one compute the same numbers; they differ only in
what the forward pass keeps for the backward pass. So besides the value and the gradient, every
problem here checks the *structure* of the learner's function:

- ``remat``: the traced jaxpr holds JAX's checkpoint where the problem wants it
  (:mod:`examples.problems._placement`: around the matrix products, or in a scan's body and not
  around the scan, with the values the problem names inside it), under either implementation
  (``remat2`` by default; a ``call_hi_primitive`` carrying a ``RematTraced`` under
  ``jax_remat3``), looking inside ``jit``, ``custom_jvp`` and other nested jaxprs
  (:func:`examples.tools.jaxprs.remat_sites`);
- ``policy``: the policy of each checkpoint found there (of nested ones, the outer: JAX recomputes
  what its policy does not keep) is the required one, compared by identity
  or equality and by behaviour (what it keeps on a probe function with and without batch
  dimensions, and with values named with the problem's names and with another, then on the
  learner's own checkpointed function: :func:`own_function_policy`);
- ``residuals``: what ``jax.vjp`` of the learner's function keeps (from
  :func:`examples.tools.residuals.saved_residuals`) is exactly what the reference solution keeps:
  the same multiset of (primitive or ``checkpoint_name`` name, shape, dtype), arguments by
  shape and dtype. Where the problem leaves code outside the checkpoint (a loss after a scan),
  a value kept there may be computed otherwise at the same shape and dtype (``h * h`` keeps
  ``h`` where ``h ** 2`` keeps ``2h``), and more broadly the check passes when the learner's
  checkpoints, each on its own, keep what the reference's keep (:func:`checkpoints_keep`): the
  line says what differs, and that it comes from the code outside the checkpoint.

What the reference keeps is worked out by :func:`prepare` before any learner code runs, so a
solution that changes JAX's configuration cannot change the yardstick.
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.problems._kept import (
    describe_computed,
    describe_keys,
    is_index,
    is_parameter,
    named_difference,
    named_values,
    parameter_values,
    residual_difference,
    residual_listing,
    residual_signature,
    same_arrays,
)
from examples.problems._placement import Placement, place
from examples.problems._policy import (
    OTHER_NAME,
    compare_policy,
    own_function_policy,
    policy_behaviour,
    policy_name,
    remat3_ignores_function_policies,
)

__all__ = [
    "OTHER_NAME",
    "Check",
    "Prepared",
    "compare_policy",
    "describe_computed",
    "max_error",
    "policy_behaviour",
    "policy_name",
    "prepare",
    "remat3_ignores_function_policies",
    "residual_listing",
    "residual_signature",
    "signature_text",
    "standard_checks",
]
from examples.problems._check_names import CHECK_NAMES
from examples.problems._spec import Case, Problem
from examples.tools.jaxprs import RematSite
from examples.tools.residuals import Residuals, checkpoint_residuals

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


@dataclasses.dataclass(frozen=True)
class Prepared:
    """The inputs and the yardsticks of one check run, made before any learner code runs."""

    cases: list[Case]
    #: what the reference solution keeps for the backward pass on ``cases[0]``
    reference_residuals: Residuals
    #: what the required policy keeps on the probe function (``None`` for JAX's default)
    policy_behaviour: tuple[Any, ...] | None
    #: each ``checkpoint_name`` of the reference, with what computed the value it names
    reference_names: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )
    #: what the reference's checkpoints keep on their own (:func:`checkpoints_keep`)
    reference_checkpoints: collections.Counter[Any] | None = None
    #: values the reference computes from no input: the parameters of a model it makes itself
    #: (:func:`~examples.problems._kept.parameter_values`), named as parameters in the lines
    reference_parameters: collections.Counter[tuple[str, str]] = dataclasses.field(
        default_factory=collections.Counter
    )


def _outermost(sites: tuple[RematSite, ...]) -> list[RematSite]:
    """The checkpoints of ``sites`` (in the traced order, outer before inner) that no other of
    them surrounds: with nested checkpoints, JAX recomputes whatever the outer one's policy does
    not keep, so the outer one's policy is the one that counts."""
    outer: list[RematSite] = []
    open_: list[RematSite] = []  # the chain of sites that may surround the next one
    for site in sites:
        while open_ and open_[-1].depth >= site.depth:
            open_.pop()
        if not open_:
            outer.append(site)
        open_.append(site)
    return outer


def checkpoints_keep(found: Placement) -> collections.Counter[Any] | None:
    """What the checkpoints where the problem wants one keep, each on its own, as one multiset of
    :func:`~examples.problems._kept.residual_key` (``None`` where there are none, or JAX cannot
    say). Code outside them (a loss after a scan) does not count here."""
    if not found.placed:
        return None
    total: collections.Counter[Any] = collections.Counter()
    try:
        for site in found.placed:
            total += residual_signature(checkpoint_residuals(site))
    except Exception:  # an exotic primitive: the whole-function comparison stands alone
        return None
    return total


def prepare(problem: Problem, seed: int) -> Prepared:
    """Draw the cases for ``seed`` and work out what the reference keeps."""
    cases = problem.make_cases(np.random.default_rng(seed))
    ref_g, ref_arrays = problem.on_arrays(problem.reference, cases[0])
    required = problem.required_policy
    return Prepared(
        cases=cases,
        reference_residuals=residual_listing(ref_g, *ref_arrays),
        policy_behaviour=None if required is None else policy_behaviour(required, problem.names),
        reference_names=named_values(ref_g, *ref_arrays),
        reference_checkpoints=checkpoints_keep(
            place(problem, jax.make_jaxpr(ref_g)(*ref_arrays).jaxpr)
        ),
        reference_parameters=parameter_values(ref_g, *ref_arrays),
    )


def standard_checks(problem: Problem, fn: Callable[..., Any], prepared: Prepared) -> list[Check]:
    """The checks every problem runs, in order; the fatal ones come first.

    Each one calls the learner's ``fn`` (so each may raise, or hang: the checker handles both).
    """
    cases = prepared.cases
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
            if callable(out):
                return False, (
                    f"returned a function for {case.label}, not an array: "
                    "jax.checkpoint(fn, policy=...) wraps a function and returns a new one; "
                    "call the new one with the arguments, jax.checkpoint(fn, policy=...)"
                    f"({', '.join(problem.arg_names)})"
                )
            want = problem.output_shape(case)
            if isinstance(out, (tuple, list, dict)):
                return False, (
                    f"returned a {type(out).__name__} of {len(out)} values for {case.label}, "
                    f"not one array of shape {want}: return only the result (a scan returns "
                    "(carry, outputs), and nnx.scan with out_axes=nnx.Carry the carry alone)"
                )
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
                hint = f"; {problem.value_hint}" if problem.value_hint else ""
                return False, (
                    f"differs from the float64 reference for {case.label}: max abs error "
                    f"{err:.3g} > allowed {allowed:.3g}{hint}"
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

    def placement() -> Placement:
        g, arrays = problem.on_arrays(fn, first)
        return place(problem, jax.make_jaxpr(g)(*arrays).jaxpr)

    def remat() -> tuple[bool, str]:
        found = placement()
        return found.ok, found.detail

    def policy() -> tuple[bool, str]:
        found = placement()
        placed = _outermost(found.placed or found.partial)
        if not placed:
            return False, found.no_policy_reason
        results = [
            compare_policy(
                s.policy, problem.required_policy, prepared.policy_behaviour, problem.names
            )
            for s in placed
        ]
        results = [
            own_function_policy(site, problem.required_policy, result)
            for site, result in zip(placed, results, strict=True)
        ]
        nested = len(placed) < len(found.placed or found.partial)
        for ok, detail in results:
            if not ok:
                if nested:
                    detail += (
                        " (judged on the outer of the nested checkpoints around the products: "
                        "JAX recomputes what the outer one's policy does not keep, whatever the "
                        "inner one's says; one checkpoint, with the policy, is enough)"
                    )
                return False, detail
        if not found.placed:
            return True, (
                f"{results[0][1]}, on the checkpoint that is there (it surrounds only part of "
                "what it should: see the remat line)"
            )
        if nested:
            return True, (
                f"{results[0][1]}, on the outer of the nested checkpoints around the products, "
                "whose policy JAX applies"
            )
        return True, results[0][1]

    def residuals() -> tuple[bool, str]:
        g, arrays = problem.on_arrays(fn, first)
        mine = residual_listing(g, *arrays)
        theirs = prepared.reference_residuals
        extra, missing = residual_difference(mine, theirs)
        renamed = named_difference(named_values(g, *arrays), prepared.reference_names)
        if not extra and not missing and renamed is not None:
            return False, (
                f"keeps {describe_computed(mine)}, as the reference does by name, shape and dtype, "
                f"but {renamed}: another value, kept under the same name ({first.label})"
            )
        if not extra and not missing:
            notes = []
            exact = residual_signature(mine) == residual_signature(theirs)
            if not exact:
                notes.append(
                    "an input given another shape, a value kept in another layout, or a value "
                    "shown as a nested checkpoint's output, counted as the value it stands for"
                )
            if any(map(is_index, mine)):
                notes.append("integer indices, which carry no gradient, not compared")
            said = f" ({'; '.join(notes)})" if notes else ""
            by = "shape" if exact else "size"
            return True, (
                f"keeps {describe_computed(mine, prepared.reference_parameters)}: the same "
                f"values, by primitive, {by} and "
                f"dtype, as the reference{said} ({first.label})"
            )
        params = prepared.reference_parameters
        differences = []
        if extra:
            differences.append(f"keeps {describe_keys(extra)} that the reference does not")
        if missing:
            differences.append(
                f"does not keep {describe_keys(missing, params)} that the reference keeps"
            )
        # Parameters the reference keeps, and yours, with a checkpoint where the problem wants
        # it, does not: your checkpoint makes them (the model is built inside it). An input the
        # reference keeps beside them may be missing too (jax 0.10.2's jax_remat3 keeps the
        # reference's input where a model built inside the checkpoint keeps none).
        remade = (
            any(is_parameter(key, params) for key in missing)
            and all(is_parameter(key, params) or key[0] == "argument" for key in missing)
            and bool(placement().placed)
        )
        found = placement()
        placed_right = found.ok
        if same_arrays(mine, theirs) and not problem.whole_in_checkpoint and placed_right:
            # Code the problem leaves outside the checkpoint (the loss, say) may keep another
            # value of the same shape: h * h keeps h where h ** 2 keeps 2h. Same memory, and not
            # what the problem is about, so it passes, with the difference said. Not where the
            # checkpoint itself is misplaced: then the difference is the checkpoint's.
            return True, (
                f"keeps {describe_computed(mine)}: arrays of the same shapes and dtypes as the "
                f"reference's {describe_computed(theirs)}, computed otherwise (yours "
                f"{' and '.join(differences)}; outside the checkpoint that is yours to choose) "
                f"({first.label})"
            )
        if (
            not problem.whole_in_checkpoint
            and placed_right
            and prepared.reference_checkpoints is not None
            and checkpoints_keep(found) == prepared.reference_checkpoints
        ):
            # The checkpoints, each on its own, keep what the reference's keep: the difference is
            # in code the problem leaves outside them (the loss after the scan, say).
            return True, (
                f"keeps {describe_computed(mine)} where the reference keeps "
                f"{describe_computed(theirs, params)}; the checkpoint keeps the same values as the "
                f"reference's (by primitive, shape and dtype), and the difference (yours "
                f"{' and '.join(differences)}) comes from the code outside it, which is yours "
                f"to choose ({first.label})"
            )
        misplaced = (
            "" if placed_right else "; the checkpoint is not where the problem asks (see remat)"
        )
        advice = (
            "; the parameters are made inside your checkpoint, so the backward pass would make "
            "them again: make the model (and initialise it) outside the checkpointed function, "
            "and pass it in"
            if remade
            else ""
        )
        return False, (
            f"besides inputs, the backward pass would keep {describe_computed(mine)}; "
            f"the reference keeps {describe_computed(theirs, params)}; yours "
            f"{' and '.join(differences)} ({first.label}){misplaced}{advice}"
        )

    checks: list[Check] = [
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
    assert tuple(name for name, _, _ in checks) == CHECK_NAMES
    return checks
