"""A diagnostic for remat that did not do what was meant: run it on your own function.

``diagnose(loss, *args)`` traces the function you differentiate, finds every ``jax.checkpoint``
in it (either remat implementation, through :mod:`examples.tools.jaxprs`) and checks each one;
``diagnose(layer, *args, policy=p)`` checks ``jax.checkpoint(layer, policy=p)`` before you put it
in a model. Either returns a :class:`Report`: the checkpoints found, what each keeps next to what
``nothing_saveable`` and no checkpoint at all keep, and a list of :class:`Finding` with a code:

=========================  =======  ================================================================
code                       level    when
=========================  =======  ================================================================
``unused-names``           warning  a name the policy saves (or offloads, or excludes) is never made
                                    by ``checkpoint_name`` inside the checkpoint
``same-as-nothing``        warning  the policy keeps exactly what ``nothing_saveable`` keeps
``same-as-everything``     warning  it keeps exactly what the function keeps without a checkpoint
                                    (what ``everything_saveable`` keeps): no memory saved
``no-unbatched-dots``      warning  a dots-without-batch-dimensions policy finds no such product
                                    (every product batched, as under a ``vmap`` over stages)
``policy-none``            note     the policy is ``None``: full recompute, not "save everything"
``remat3-plain-policy``    note     under ``jax_remat3``, a policy given as a plain function is
                                    asked about only some operations (which, depends on the release:
                                    :func:`remat3_asks_plain_policies`)
``whole-function``         warning  the checkpoint is all there is: it wraps the whole function
``no-checkpoint``          note     the traced function has no checkpoint at all
``not-compared``           note     the residual listings could not be computed for a checkpoint
=========================  =======  ================================================================

What each checkpoint keeps is asked of JAX itself (:mod:`examples.tools.residuals`), by re-running
the checkpointed function under three policies; nothing here is inferred from policy names.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

import jax

from examples.tools import jaxprs
from examples.tools.display import Table, format_bytes
from examples.tools.policy_calls import (
    describe_policy,
    factory_of,
    policy_names,
    wants_unbatched_dots,
)
from examples.tools.residuals import (
    Residuals,
    checkpoint_function,
    checkpoint_residuals,
    saved_residuals,
)

P = jax.checkpoint_policies
Level = Literal["warning", "note"]

# --- what jax_remat3 does with a policy written as a plain function ------------------------------


@functools.cache
def remat3_asks_plain_policies() -> frozenset[str] | None:
    """Under ``jax_remat3``, the primitives about which a policy given as a plain function is
    asked, on the installed JAX; ``None`` where there is no ``jax_remat3``.

    Found by differentiating a small function (a product, a named value, a ``sin``) under a
    policy that records each question and keeps everything. An empty set means the policy is
    never asked: the checkpoint recomputes everything (jax 0.10 does this, JAX PRs 37888 and
    39432); jax 0.12 asks it about products and named values.
    """
    if not jaxprs.remat3_available():
        return None
    from jax.ad_checkpoint import checkpoint_name

    asked: set[str] = set()

    def keep_all(prim: Any, *_: Any, **__: Any) -> bool:
        asked.add(prim.name)
        return True

    def f(x: jax.Array, w: jax.Array) -> jax.Array:
        return jax.numpy.sin(checkpoint_name(x @ w, "y")).sum()

    ones = jax.numpy.ones((2, 2))
    with jaxprs.remat3():
        jax.grad(jax.checkpoint(f, policy=keep_all))(ones, ones)
    return frozenset(asked)


def _would_keep_other_values(policy: Any) -> bool:
    """Whether a policy given as a function would keep the output of an ordinary operation
    (``sin``), which :func:`remat3_asks_plain_policies` never asks about on any release; ``True``
    where the function cannot be asked outside a trace (it may answer so inside one)."""
    if policy is None or not callable(policy) or policy is P.everything_saveable:
        return False
    try:
        answer = policy(jax.lax.sin_p, jax.ShapeDtypeStruct((2,), jax.numpy.float32))
    except Exception:
        return True
    return answer is True or type(answer).__name__ == "Offloadable"


# --- reading the traced function -----------------------------------------------------------------


def made_names(jaxpr: Any) -> set[str]:
    """Names given with ``checkpoint_name`` anywhere in ``jaxpr``, under either implementation."""
    found = set()
    for eqn, _ in jaxprs.walk(jaxpr):
        if eqn.primitive.name == "name":
            found.add(eqn.params["name"])
        prim = eqn.params.get("_prim")  # jax_remat3 stages CheckpointName as a hi-primitive
        if type(prim).__name__ == "CheckpointName":
            found.add(prim.params["name"])
    return found


def products(jaxpr: Any) -> tuple[int, int]:
    """``dot_general`` equations in ``jaxpr``: all of them, and those without batch dimensions."""
    total = unbatched = 0
    for eqn, _ in jaxprs.walk(jaxpr):
        if eqn.primitive.name == "dot_general":
            total += 1
            (_, _), (lhs_batch, rhs_batch) = eqn.params["dimension_numbers"]
            unbatched += not lhs_batch and not rhs_batch
    return total, unbatched


def _top_level(jaxpr: Any) -> Any:
    """The jaxpr itself, or, where it is one call (a ``jax.jit``) and no checkpoint, its body."""
    jaxpr = jaxprs.open_jaxpr(jaxpr)
    while len(jaxpr.eqns) == 1 and not jaxprs.is_remat(jaxpr.eqns[0]):
        inner = list(jaxprs.equation_jaxprs(jaxpr.eqns[0]))
        if len(inner) != 1:
            break
        jaxpr = jaxprs.open_jaxpr(inner[0])
    return jaxpr


def _listing_key(listing: Residuals) -> list[tuple[Any, ...]]:
    """What a listing keeps, in a comparable form; literal and constant scalars left out (a
    function traced without a checkpoint keeps a few that a checkpointed one folds away)."""
    kept = (r for r in listing if r.kind not in ("literal", "constant"))
    return sorted((r.shape, str(r.dtype), r.kind, r.detail or "") for r in kept)


# --- the report ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Finding:
    """One thing the diagnostic noticed; ``checkpoint`` is its number in the report (from 1)."""

    code: str
    level: Level
    message: str
    checkpoint: int | None = None

    def __str__(self) -> str:
        where = f" checkpoint #{self.checkpoint}:" if self.checkpoint else ""
        return f"{self.level} [{self.code}]{where} {self.message}"


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of the traced function (identical ones, as in an unrolled loop, once)."""

    number: int
    count: int  #: how many identical checkpoints this one stands for
    policy: Any
    products: int  #: matrix products inside
    unbatched_products: int  #: of which without batch dimensions
    names: frozenset[str]  #: names made with ``checkpoint_name`` inside
    kept: Residuals | None  #: what it keeps under its policy (``None``: not computed)
    nothing: Residuals | None  #: what ``nothing_saveable`` would keep
    everything: Residuals | None  #: what the function keeps without a checkpoint

    @property
    def policy_text(self) -> str:
        return describe_policy(self.policy)


def _kept(listing: Residuals | None) -> str:
    if listing is None:
        return "n/a"
    computed = listing.excluding_arguments()
    return f"{len(computed)} ({format_bytes(computed.nbytes)})"


@dataclasses.dataclass(frozen=True)
class Report:
    """What :func:`diagnose` found. Print it, or let a notebook cell show it as tables."""

    checkpoints: tuple[Checkpoint, ...]
    findings: tuple[Finding, ...]
    implementation: str  #: "remat2" (JAX's default) or "jax_remat3"

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == "warning")

    def table(self) -> Table:
        """One row per checkpoint; residual counts and bytes leave out the inputs (kept anyway)."""
        header = ["#", "policy", "products (unbatched)", "names made inside", "keeps"]
        header += ["nothing_saveable keeps", "no checkpoint keeps"]
        rows = [
            [
                f"{c.number}" + (f" (×{c.count})" if c.count > 1 else ""),
                f"`{c.policy_text}`",
                f"{c.products} ({c.unbatched_products})",
                ", ".join(f"`{n}`" for n in sorted(c.names)) or "none",
                _kept(c.kept),
                _kept(c.nothing),
                _kept(c.everything),
            ]
            for c in self.checkpoints
        ]
        return Table(
            header,
            rows,
            align=["left", "left", "right", "left", "right", "right", "right"],
            caption="Values kept for the backward pass besides the checkpoint's inputs: "
            "count (bytes).",
        )

    def __str__(self) -> str:
        lines = [f"{len(self.checkpoints)} checkpoint(s) found ({self.implementation})"]
        if self.checkpoints:
            lines.append(self.table().to_text())
        lines += [str(f) for f in self.findings] or ["no findings"]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        parts = [f"{len(self.checkpoints)} checkpoint(s) found (`{self.implementation}`)"]
        if self.checkpoints:
            parts.append(self.table().to_markdown())
        found = [
            f"- **{f.level}** `{f.code}`"
            + (f" (checkpoint #{f.checkpoint})" if f.checkpoint else "")
            + f": {f.message}"
            for f in self.findings
        ]
        parts.append("\n".join(found) or "No findings.")
        return "\n\n".join(parts)


# --- the checks ----------------------------------------------------------------------------------

_UNSET: Any = object()


def diagnose(fn: Callable[..., Any], *args: Any, policy: Any = _UNSET, **kwargs: Any) -> Report:
    """Check the checkpoints in ``fn`` (called with ``args``) and return a :class:`Report`.

    Without ``policy``, ``fn`` is the function you differentiate (the loss) with its
    ``jax.checkpoint`` calls inside. With ``policy``, ``fn`` is the piece you mean to checkpoint
    (one layer) and ``jax.checkpoint(fn, policy=policy)`` is checked; ``policy=None`` is checked
    too, as ``None``.
    """
    piece = policy is not _UNSET
    target = jax.checkpoint(fn, policy=policy) if piece else fn
    closed = jax.make_jaxpr(target)(*args, **kwargs)
    for eqn, _ in jaxprs.walk(closed):
        if jaxprs.is_remat(eqn) and eqn.params.get("differentiated"):
            raise ValueError(
                "diagnose traces the function you differentiate, but this one already computes "
                "a gradient (it holds a checkpoint marked differentiated=True): pass the loss, "
                "not jax.grad(loss)"
            )
    everywhere = made_names(closed)
    checkpoints: list[Checkpoint] = []
    findings: list[Finding] = []
    seen: dict[tuple[str, str], int] = {}
    for site in jaxprs.remat_sites(closed.jaxpr):
        key = (repr(site.policy), str(site.jaxpr))
        if key in seen:
            index = seen[key]
            checkpoints[index] = dataclasses.replace(
                checkpoints[index], count=checkpoints[index].count + 1
            )
            continue
        seen[key] = len(checkpoints)
        declared = policy if piece and not checkpoints else site.policy
        checkpoint, found = _check(len(checkpoints) + 1, site, declared, everywhere)
        checkpoints.append(checkpoint)
        findings += found
    if not checkpoints:
        findings.append(
            Finding(
                "no-checkpoint",
                "note",
                "the traced function has no jax.checkpoint: the backward pass keeps everything "
                "the forward pass computed that it needs",
            )
        )
    elif not piece:
        top = _top_level(closed.jaxpr)
        if all(jaxprs.is_remat(eqn) for eqn in top.eqns):
            findings.append(
                Finding(
                    "whole-function",
                    "warning",
                    "the checkpoint wraps everything the function does: the backward pass "
                    "starts right where the forward pass ends, so it recomputes the whole "
                    "forward pass and its residuals are all alive at once anyway; checkpoint "
                    "each layer (the scanned body) instead. If this function is one layer "
                    "rather than the function you differentiate, pass the loss, or call "
                    "diagnose(layer, ..., policy=...)",
                    1,
                )
            )
    implementation = "jax_remat3" if jaxprs.remat3_enabled() else "remat2"
    return Report(tuple(checkpoints), tuple(findings), implementation)


def _check(
    number: int, site: jaxprs.RematSite, declared: Any, everywhere: set[str]
) -> tuple[Checkpoint, list[Finding]]:
    total, unbatched = products(site.jaxpr)
    names = frozenset(made_names(site.jaxpr))
    findings = list(_policy_findings(number, declared, names, everywhere, total, unbatched))
    listings = _listings(site)
    if isinstance(listings, Exception):  # an exotic primitive; say so rather than stop
        message = f"residuals not computed: {listings!r}"
        findings.append(Finding("not-compared", "note", message, number))
        kept = nothing = everything = None
    else:
        kept, nothing, everything = listings
        findings += _residual_findings(number, declared, kept, nothing, everything)
    checkpoint = Checkpoint(number, 1, declared, total, unbatched, names, kept, nothing, everything)
    return checkpoint, findings


def _listings(site: jaxprs.RematSite) -> tuple[Residuals, Residuals, Residuals] | Exception:
    """What the checkpointed function keeps under its policy, under ``nothing_saveable``, and
    without a checkpoint; or the error that stopped JAX from saying."""
    try:
        fn, avals = checkpoint_function(site)
        return (
            checkpoint_residuals(site),
            checkpoint_residuals(site, P.nothing_saveable),
            saved_residuals(fn, *avals),
        )
    except Exception as error:
        return error


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(repr(n) for n in sorted(names)) or "none"


def _policy_findings(
    number: int,
    policy: Any,
    names: frozenset[str],
    everywhere: set[str],
    total: int,
    unbatched: int,
) -> Iterator[Finding]:
    if policy is None:
        also = " (under jax_remat3 jax.checkpoint stores nothing_saveable as None too)"
        message = "policy=None is JAX's default: full recompute, the same as nothing_saveable"
        message += also if jaxprs.remat3_enabled() else ""
        message += ". If you meant 'save everything', that is everything_saveable, or no checkpoint"
        yield Finding("policy-none", "note", message, number)
    asked = remat3_asks_plain_policies() if jaxprs.remat3_enabled() else None
    if asked and _would_keep_other_values(policy):
        message = "under jax_remat3 this JAX asks a policy given as a plain function only about "
        message += f"{_quoted(asked)}; everything else inside is recomputed, whatever the policy "
        message += "would answer. Check what it keeps with print_saved_residuals"
        yield Finding("remat3-plain-policy", "note", message, number)
    missing: set[str] = set(policy_names(policy) or ()) - names
    if missing:
        elsewhere = missing & everywhere
        message = f"the policy names {_quoted(missing)}, which no checkpoint_name inside this "
        message += f"checkpoint makes (names made inside: {_quoted(names)}); "
        message += (
            f"{_quoted(elsewhere)} is made outside it, where the policy does not look"
            if elsewhere
            else "check the spelling, and that checkpoint_name runs inside the function you "
            "checkpoint"
        )
        yield Finding("unused-names", "warning", message, number)
    if wants_unbatched_dots(policy) and not unbatched:
        what = describe_policy(policy)
        if not total:
            message = f"there is no matrix product inside, so {what} has nothing to keep"
        else:
            message = (
                "the one matrix product inside carries"
                if total == 1
                else (f"all {total} matrix products inside carry")
            )
            message += f" a batch dimension, so {what} keeps none; a jax.vmap over stages with "
            message += "per-stage weights gives every product one (MaxText PR 971). Name the "
            message += "values to keep with checkpoint_name and use save_only_these_names"
        yield Finding("no-unbatched-dots", "warning", message, number)


def _residual_findings(
    number: int, policy: Any, kept: Residuals, nothing: Residuals, everything: Residuals
) -> Iterator[Finding]:
    kept_key, nothing_key, everything_key = map(_listing_key, (kept, nothing, everything))
    if nothing_key == everything_key:
        return  # nothing to choose: every policy keeps the same here
    if kept_key == everything_key:
        message = "it keeps exactly what the function keeps without a checkpoint (what "
        computed = kept.excluding_arguments()
        message += f"everything_saveable keeps): {len(computed)} values, "
        message += f"{format_bytes(computed.nbytes)}, besides the inputs. The "
        message += "checkpoint saves no memory and can cost time"
        if factory_of(policy) == "save_anything_except_these_names":
            message += "; save_anything_except_these_names ignores its names in this JAX (its "
            message += "body is `lambda *_, **__: True`)"
        yield Finding("same-as-everything", "warning", message, number)
    elif kept_key == nothing_key and policy is not None and policy is not P.nothing_saveable:
        message = f"{describe_policy(policy)} keeps exactly what nothing_saveable keeps (only "
        message += "the inputs): the policy chose nothing to save"
        plain = inspect.isfunction(policy) and jaxprs.remat3_enabled()
        if plain and not remat3_asks_plain_policies():
            message += "; under jax_remat3 this JAX never asks a policy given as a plain "
            message += "function, so it is full recompute (JAX PRs 37888, 39432)"
        yield Finding("same-as-nothing", "warning", message, number)
