"""Where a problem wants its checkpoint, and whether the learner's traced program has it there.

A problem declares it in its :class:`~examples.problems._spec.Problem`:

- ``products_inside``: the checkpoint surrounds at least this many matrix products (the whole
  computation, not one part of it);
- ``inside_scan``: the checkpoint sits in the body of a ``scan`` and surrounds all the work of
  that body, so that each step (each layer) is checkpointed whole, and no checkpoint surrounds
  a ``scan``; ``products_inside`` then counts the products of one step;
- ``names``: the checkpointed function names these values with ``checkpoint_name``, inside the
  checkpoint, where a names-based policy can see them.

:func:`place` reads all three off a traced jaxpr, under either remat implementation
(:func:`examples.tools.jaxprs.remat_sites`, :func:`examples.tools.jaxprs.checkpoint_names`). The
checker's ``remat`` line is its verdict; the ``policy`` line judges the policies of the checkpoints
it found where they belong.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import jax.numpy as jnp

from examples.problems._spec import Problem
from examples.tools.jaxprs import (
    RematSite,
    checkpoint_names,
    count_primitive,
    equation_jaxprs,
    is_remat,
    live_equations,
    open_jaxpr,
    remat_sites,
    walk,
)

#: The loop primitive a stack of layers is applied with (``jax.lax.scan``, ``nnx.scan``, and
#: ``fori_loop`` or ``lax.map`` with a fixed length all trace to it).
SCAN = "scan"


@dataclasses.dataclass(frozen=True)
class Placement:
    """The verdict on where the learner's checkpoints are."""

    ok: bool
    detail: str  #: one line: what was found, or what is wrong and what to do
    #: the checkpoints where the problem wants one (the policy check judges their policies)
    placed: tuple[RematSite, ...]
    #: why there is no policy to judge, when ``placed`` is empty
    no_policy_reason: str = ""
    #: checkpoints in the right place that surround only part of what they should: their
    #: policies are still judged, so that the policy line names the policy, not a missing one
    partial: tuple[RematSite, ...] = ()


#: Primitives that move or relabel data without computing: allowed outside the checkpoint.
_NOT_WORK = frozenset(
    {"convert_element_type", "copy", "copy_p", "device_put", "broadcast_in_dim", "reshape"}
)


def work_outside_checkpoints(jaxpr: Any) -> collections.Counter[str]:
    """The primitives computed outside every checkpoint (looking inside ``jit`` and
    ``custom_jvp`` wrappers, not inside checkpoints)."""
    found: collections.Counter[str] = collections.Counter()
    for eqn in open_jaxpr(jaxpr).eqns:
        if is_remat(eqn):
            continue
        subs = list(equation_jaxprs(eqn))
        if subs:
            for sub in subs:
                found.update(work_outside_checkpoints(sub))
        elif eqn.primitive.name not in _NOT_WORK and not _index_arithmetic(eqn):
            found[eqn.primitive.name] += 1
    return found


def _index_arithmetic(eqn: Any) -> bool:
    """Whether every output of ``eqn`` is an integer or boolean value: a loop counter
    (``fori_loop`` adds one to its index outside the learner's body), a comparison or an index,
    which carries no gradient and which no checkpoint is there to recompute."""
    avals = [getattr(v, "aval", None) for v in eqn.outvars]
    return bool(avals) and all(
        a is not None
        and hasattr(a, "dtype")
        and (jnp.issubdtype(a.dtype, jnp.integer) or jnp.issubdtype(a.dtype, jnp.bool_))
        for a in avals
    )


def work_in_scan_bodies_outside_checkpoints(jaxpr: Any) -> collections.Counter[str]:
    """:func:`work_outside_checkpoints` of the body of every ``scan`` in ``jaxpr``."""
    found: collections.Counter[str] = collections.Counter()
    for eqn, _ in walk(jaxpr):
        if eqn.primitive.name == SCAN:
            for body in equation_jaxprs(eqn):
                found.update(work_outside_checkpoints(body))
    return found


def _work_left_outside(
    site: RematSite, outside: collections.Counter[str], where: tuple[str, str], advice: str
) -> str:
    """``a checkpoint (remat2) [where] surrounds 1 matrix product, but add, tanh run outside it
    [where]; advice``."""
    runs = "runs" if len(outside) == 1 else "run"
    return (
        f"a checkpoint ({site.primitive}) {where[0]}surrounds "
        f"{_count(site.products, 'matrix product')}, but {', '.join(sorted(outside))} {runs} "
        f"outside it{where[1]}; {advice}"
    )


def _quoted(names: Any) -> str:
    return ", ".join(repr(n) for n in sorted(names))


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def place(problem: Problem, jaxpr: Any) -> Placement:
    """Judge the checkpoints of ``jaxpr`` (the learner's function, traced) against ``problem``."""
    anywhere = remat_sites(jaxpr)
    jaxpr = live_equations(jaxpr)
    sites = remat_sites(jaxpr)
    where = "in the scan's body" if problem.inside_scan else "around the computation"
    if anywhere and not sites:
        return Placement(
            False,
            f"there is a checkpoint ({anywhere[0].primitive}), but what it computes is thrown "
            "away: nothing the function returns is read from it (a model's init inside the "
            "function, say), so it does nothing for the backward pass; checkpoint the "
            "computation whose result you return",
            (),
            "no checkpoint on what the function returns, so no policy to judge",
        )
    if not sites:
        return Placement(
            False,
            "no checkpoint in the traced function: the value is right, but nothing tells JAX "
            "to recompute anything on the backward pass",
            (),
            "no checkpoint, so no policy either",
        )
    candidates = sites
    problems: list[str] = []
    if problem.inside_scan:
        if count_primitive(jaxpr, SCAN) == 0:
            return Placement(
                False,
                "there is a checkpoint but no scan in the traced function: apply the layers with "
                f"{problem.scan_call} (a Python loop traces one copy of the layer per layer)",
                (),
                "no scan, so no checkpoint in a scan's body and no policy to judge",
            )
        around = [s for s in sites if s.contains(SCAN)]
        candidates = [s for s in sites if SCAN in s.within]
        if around:
            problems.append(
                f"a checkpoint ({around[0].primitive}) surrounds the whole scan: the backward "
                "pass then recomputes every layer at once and holds all their values together; "
                "checkpoint the scanned function (one layer) instead"
            )
        elif not candidates:
            problems.append(
                (
                    f"the checkpoint ({sites[0].primitive}) sits outside the scan"
                    if len(sites) == 1
                    else f"the {len(sites)} checkpoints ({sites[0].primitive}) sit outside the scan"
                )
                + "; checkpoint the function the scan applies to each layer"
            )
    placed = [s for s in candidates if s.products >= problem.products_inside]
    if candidates and not placed:
        most = max(s.products for s in candidates)
        dead = _products_thrown_away(anywhere, most, problem.products_inside)
        if dead:
            return Placement(False, dead, (), "", tuple(candidates))
        named_outside = _named_outside(problem, jaxpr, candidates)
        if named_outside:
            problems.append(
                f"{named_outside}, and the checkpoint surrounds {most} of the "
                f"{problem.products_inside} matrix products; name the value inside the "
                "checkpointed function, and wrap the whole computation in it"
            )
        there, whole = (
            (" in the scan's body", "the whole layer")
            if problem.inside_scan
            else (
                "",
                "the whole computation",
            )
        )
        problems.append(
            f"a checkpoint ({candidates[0].primitive}) is there, but the largest one{there} "
            f"surrounds {most} of the {problem.products_inside} matrix products; wrap {whole}"
        )
    named = [s for s in placed if set(problem.names) <= set(checkpoint_names(s.jaxpr))]
    if placed and not named:
        problems.append(_missing_names(problem, jaxpr, placed))
    if placed and problem.inside_scan:
        outside = work_in_scan_bodies_outside_checkpoints(jaxpr)
        if outside:
            problems.append(
                _work_left_outside(
                    placed[0],
                    outside,
                    ("sits in the scan's body and ", " in the body"),
                    "checkpoint the whole function the scan applies (one layer)",
                )
            )
    if placed and problem.whole_in_checkpoint:
        outside = work_outside_checkpoints(jaxpr)
        if outside:
            problems.append(
                _work_left_outside(
                    placed[0],
                    outside,
                    ("", ""),
                    "the problem asks for the whole computation inside one jax.checkpoint",
                )
            )
    no_policy = f"no checkpoint {where}, so no policy to judge"
    partial = tuple(candidates) if candidates and not placed else ()
    if problems:
        return Placement(False, problems[0], tuple(placed), no_policy, partial)
    first = named[0]
    detail = f"a checkpoint ({first.primitive}) "
    if problem.inside_scan:
        detail += "sits in the scan's body and "
    detail += f"surrounds {_count(first.products, 'matrix product')}"
    if problem.names:
        detail += f", with the value{'s' if len(problem.names) > 1 else ''} named "
        detail += f"{_quoted(problem.names)} inside it"
    if problem.inside_scan:
        detail += "; none surrounds the scan"
    detail += f" ({_count(len(sites), 'checkpoint equation')} in the trace)"
    if max(s.depth for s in sites) > 0:
        detail += "; note: a checkpoint is nested inside another, one level is enough"
    return Placement(True, detail, tuple(named), no_policy)


def _products_thrown_away(anywhere: list[RematSite], live: int, wanted: int) -> str:
    """Why no checkpoint that counts surrounds the products, when one did before dead-code
    elimination: the function returns only its other outputs (the parameters that a linen
    model's ``init`` makes inside ``nn.checkpoint``, say), and the products whose result it
    returns run outside it. ``""`` otherwise."""
    before = max((s.products for s in anywhere), default=0)
    if before < wanted or live >= wanted:
        return ""
    site = next(s for s in anywhere if s.products == before)
    return (
        f"a checkpoint ({site.primitive}) surrounds {_count(before, 'matrix product')}, but "
        "nothing the function returns reads them: only its other outputs are used (the "
        "parameters a model's init makes, say), so the products whose result you return run "
        "outside any checkpoint; checkpoint the computation you return (with Flax linen, apply "
        "the nn.checkpoint module, not only init it)"
    )


def _named_outside(problem: Problem, jaxpr: Any, sites: list[RematSite]) -> str:
    """``"the value named 'h' is named outside the checkpoint, where its policy cannot see it"``
    for the required names given outside every checkpoint of ``sites``; ``""`` if none is."""
    inside: set[str] = set().union(*(checkpoint_names(s.jaxpr) for s in sites))
    anywhere = set(checkpoint_names(jaxpr))
    outside = [n for n in problem.names if n not in inside and n in anywhere]
    if not outside:
        return ""
    return (
        f"the value named {_quoted(outside)} is named outside the checkpoint, where its policy "
        "cannot see it"
    )


def _missing_names(problem: Problem, jaxpr: Any, placed: list[RematSite]) -> str:
    """Why the required names are not inside the checkpoint: absent, misspelt or outside it."""
    inside: set[str] = set().union(*(checkpoint_names(s.jaxpr) for s in placed))
    missing = [n for n in problem.names if n not in inside]
    outside = _named_outside(problem, jaxpr, placed)
    if outside:
        return f"{outside}; call checkpoint_name inside the checkpointed function"
    found = f" (the names in it: {_quoted(inside)})" if inside else " (it names no value)"
    return (
        f"no value inside the checkpoint is named {_quoted(missing)}{found}; mark it with "
        f"checkpoint_name(value, {missing[0]!r})"
    )
