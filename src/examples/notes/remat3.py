"""JAX's next remat implementation (``jax_remat3``): the code of ``docs/notes/jax-remat3.md``.

The installed JAX carries a second implementation of ``jax.checkpoint`` behind the config flag
``jax_remat3`` (off by default). Each function here measures one point of the migration guide on
the installed JAX, with the flag off and on, and ``tests/notes/test_remat3.py`` checks each one
against the release's own behaviour. The flag is set only through
:func:`examples.notes.remat3_check.remat3_flag`, which puts it back as it found it. How the points
behaved on the other releases of the matrix is read from the committed release records, which
hold :func:`remat3_points` as measured on each release (:func:`release_table`). Preparing code
for the flag is :mod:`examples.notes.remat3_prepare`; a function's own rematerialization rule,
:mod:`examples.notes.custom_remat_rule`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from examples.notes.remat3_check import linen_case as linen_case  # the page's check, re-exported
from examples.notes.remat3_check import nnx_case as nnx_case
from examples.notes.remat3_check import remat3_flag as remat3
from examples.notes.remat3_check import scan_transformer_case as scan_transformer_case
from examples.tools.display import Table, format_bytes
from examples.tools.jaxprs import config_value, traced_remat_sites
from examples.tools.residuals import Residuals, saved_residuals
from examples.tutorial.traced import layer


def two_layers(W: jax.Array, x: jax.Array) -> jax.Array:
    """Two ``sin(W @ x)`` layers; the first one's output is named ``"hidden"``."""
    h = jax.ad_checkpoint.checkpoint_name(layer(W, x), "hidden")
    return jnp.sum(layer(W, h))


def two_layers_inputs(width: int = 4) -> tuple[jax.Array, jax.Array]:
    W = jax.random.normal(jax.random.key(2), (width, width)) / np.sqrt(width)
    return W, jnp.linspace(-1.0, 1.0, width)


def two_layers_grad_float64(W: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d two_layers / d (W, x) by hand, in NumPy float64: an independent reference."""
    W, x = np.asarray(W, np.float64), np.asarray(x, np.float64)
    z1 = W @ x
    h = np.sin(z1)
    z2 = W @ h
    g2 = np.cos(z2)  # d sum(sin(z2)) / d z2
    g_h = W.T @ g2
    g1 = g_h * np.cos(z1)
    return np.outer(g2, h) + np.outer(g1, x), W.T @ g1


def keep_everything(prim: Any, *avals: Any, **params: Any) -> bool:
    """A custom policy in the form ``jax.checkpoint``'s docstring describes: it says "save"."""
    return True


def policies_to_compare() -> dict[str, Callable[..., Any] | None]:
    """The policies the page compares between the two implementations, by the call shown."""
    cp = jax.checkpoint_policies
    return {
        "no policy": None,
        "dots_saveable": cp.dots_saveable,
        'save_only_these_names("hidden")': cp.save_only_these_names("hidden"),
        "everything_saveable": cp.everything_saveable,
        'save_anything_except_these_names("hidden")': cp.save_anything_except_these_names("hidden"),
        "save_from_both_policies(dots_saveable, ...)": cp.save_from_both_policies(
            cp.dots_saveable, cp.save_only_these_names("hidden")
        ),
        "keep_everything (custom function)": keep_everything,
    }


def residuals_of(
    policy: Callable[..., Any] | None, remat3_on: bool, checkpoint: bool = True
) -> Residuals:
    """What the gradient of :func:`two_layers` keeps, with or without ``jax_remat3``."""
    with remat3(remat3_on):  # wrapped inside: some releases read the flag when wrapping
        f = jax.checkpoint(two_layers, policy=policy) if checkpoint else two_layers
        return saved_residuals(f, *two_layers_inputs())


def kept(listing: Residuals) -> str:
    """``"cos, 'hidden', cos"``: what the forward pass computed and kept, in JAX's order."""
    computed = listing.excluding_arguments()
    if not computed:
        return "nothing"
    return ", ".join(f"'{r.name}'" if r.kind == "named" else str(r.detail) for r in computed)


def _code(items: str) -> str:
    return items if items == "nothing" else ", ".join(f"`{i}`" for i in items.split(", "))


def policy_table() -> Table:
    """What each policy keeps of :func:`two_layers` under both implementations."""
    rows = [
        (
            "no `jax.checkpoint` at all",
            *(kept(residuals_of(None, on, False)) for on in (False, True)),
        )
    ]
    for name, policy in policies_to_compare().items():
        rows.append((f"`{name}`", *(_code(kept(residuals_of(policy, on))) for on in (False, True))))
    return Table(["policy", "default (`remat2`) keeps", "`jax_remat3` keeps"], rows)


def barriers(prevent_cse: bool, remat3_on: bool) -> int:
    """Optimization barriers in the lowered gradient of a checkpointed function.

    ``prevent_cse=True`` asks for them: they stop XLA from merging the recomputation with the
    forward pass (common subexpression elimination), which would undo the remat.
    """
    with remat3(remat3_on):
        f = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)), prevent_cse=prevent_cse)
        return jax.jit(jax.grad(f)).lower(1.0).as_text().count("stablehlo.optimization_barrier")


#: The upgrade flag that takes cotangents out of ``jax_remat3``'s barriers (jax 0.11.2 on).
NO_COTANGENTS = "jax_remat_barrier_no_cotangents"


def barrier_operands(remat3_on: bool, no_cotangents: bool = False) -> int | None:
    """How many values the optimization barriers pin in the lowered backward pass of a
    checkpointed ``sin(sin(x))`` (``prevent_cse=True``; ``x`` and the cotangent are its two
    inputs), with ``jax_remat3`` and ``jax_remat_barrier_no_cotangents`` as given; ``None``
    where the release lacks that flag."""
    if not hasattr(jax.config, NO_COTANGENTS):
        return None
    with config_value(NO_COTANGENTS, no_cotangents), remat3(remat3_on):
        f = jax.checkpoint(lambda x: jnp.sin(jnp.sin(x)))
        backward = jax.jit(lambda x, cotangent: jax.vjp(f, x)[1](cotangent)[0])
        text = backward.lower(1.0, 2.0).as_text()
    count = 0
    for line in text.splitlines():
        if "stablehlo.optimization_barrier" in line:
            operands = line.split("stablehlo.optimization_barrier", 1)[1].split(" : ", 1)[0]
            count += len([o for o in operands.split(",") if o.strip()])
    return count


def implementation_by_wrap_time() -> Table:
    """Which primitive a checkpoint traces to, by where the flag stood at wrapping and at tracing.

    Releases differ in when ``jax.checkpoint`` reads ``jax_remat3``: when it wraps the function
    (then a function decorated before the flag was set keeps the default implementation) or
    when the wrapped function is called (:func:`flag_read_at_call_time`).
    """
    W, x = two_layers_inputs()
    rows = []
    for wrapped_on in (False, True):
        with remat3(wrapped_on):
            f = jax.checkpoint(two_layers)
        for traced_on in (False, True):
            with remat3(traced_on):
                (site,) = traced_remat_sites(f, W, x)
            rows.append((_on_off(wrapped_on), _on_off(traced_on), f"`{site.primitive}`"))
    return Table(["flag when wrapped", "flag when traced", "checkpoint traces to"], rows)


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def flag_read_at_call_time() -> bool:
    """Whether a checkpoint wrapped with the flag off traces to ``jax_remat3`` when run with it
    on (the flag read at call time) or not (read when ``jax.checkpoint`` wraps)."""
    with remat3(False):
        f = jax.checkpoint(two_layers)
    with remat3(True):
        (site,) = traced_remat_sites(f, *two_layers_inputs())
    return bool(site.primitive != "remat2")


def names_kept_when_wrapped_before_the_flag() -> str:
    """What a ``save_only_these_names("hidden")`` checkpoint wrapped with the flag off keeps when
    it is run with the flag on."""
    policy = jax.checkpoint_policies.save_only_these_names("hidden")
    with remat3(False):
        f = jax.checkpoint(two_layers, policy=policy)
    with remat3(True):
        return kept(saved_residuals(f, *two_layers_inputs()))


def argument_names(remat3_on: bool) -> list[str]:
    """How the residual listing names the arguments of :func:`two_layers`."""
    return [str(r.argument) for r in residuals_of(None, remat3_on).of_kind("argument")]


def static_outcome(remat3_on: bool, by_keyword: bool = False, **options: Any) -> str:
    """``jax.checkpoint(step_body, **options)`` (default ``static_argnames="is_training"``)
    differentiated with ``is_training`` passed by position, or by keyword: the gradient, or the
    name of the error it raises."""
    from examples.notes.new_checkpoint import step_body

    with remat3(remat3_on):
        try:  # some releases refuse the options when the checkpoint is made (jax 0.11.2)
            f = jax.checkpoint(step_body, **(options or {"static_argnames": "is_training"}))
            g = jax.grad(f)(0.5, is_training=True) if by_keyword else jax.grad(f)(0.5, True)
            return f"{float(g):.6g}"
        except Exception as e:
            return type(e).__name__


def static_sentence(outcomes: dict[str, list[str]]) -> str:
    """The page's sentence on :func:`static_outcome`'s three cases (``{case: [flag off, flag on]}``,
    in the page's order): what works where, read from the outcomes."""
    (names_off, names_on), (keyword_off, keyword_on), (cse_off, cse_on) = outcomes.values()

    def works(outcome: str) -> bool:
        return not outcome.isidentifier()  # a gradient, not an error's name

    names = (
        "makes the argument static only with the flag"
        if works(names_on) and not works(names_off)
        else f"gives {names_off} without the flag and {names_on} with it"
    )
    return (
        f"`static_argnames` {names}; list the argument in `static_argnums` until the flag is the "
        f"default. Passed by keyword, an argument listed in `static_argnums` gives "
        f"`{keyword_off}` without the flag and `{keyword_on}` with it"
        + (
            " (JAX refuses the keyword without the flag, jax-ml/jax#18405, and traces it with the"
            " flag, so the `if` fails)"
            if (keyword_off, keyword_on) == ("ValueError", "TracerBoolConversionError")
            else ""
        )
        + ". A `prevent_cse` tuple beside static arguments "
        + ("works" if works(cse_off) else f"gives `{cse_off}`")
        + " without the flag and "
        + ("works" if works(cse_on) else f"gives `{cse_on}`")
        + " with it."
    )


def exclusion_under_flag(
    model: Callable[..., Any], args: Any, excluding: Callable[..., Any]
) -> tuple[int, int] | None:
    """Bytes of computed values ``model`` keeps under ``jax_remat3`` with the policy
    ``excluding`` (the policy reference's ``excluding_names``) and with a custom policy that
    allows everything; ``None`` where the release has no flag."""
    if not hasattr(jax.config, "jax_remat3"):
        return None
    sizes = []
    for policy in (excluding, keep_everything):
        with remat3(True):
            kept = saved_residuals(jax.checkpoint(model, policy=policy), *args)
        sizes.append(kept.excluding_arguments().nbytes)
    return sizes[0], sizes[1]


def exclusion_sentence(sizes: tuple[int, int] | None, name: str = "hidden") -> str:
    """The policy reference's sentence on :func:`exclusion_under_flag`."""
    if sizes is None:
        return f"jax {jax.__version__} has no `jax_remat3` flag to try it with"
    excluded, everything = (format_bytes(b) for b in sizes)
    if sizes[0] < sizes[1]:
        return (
            f"excluding `{name}` keeps {excluded} of computed values where a policy that allows "
            f"everything keeps {everything}: there, the exclusion does drop an array"
        )
    return f"excluding `{name}` keeps {excluded}, as much as allowing everything: no array dropped"


# --- the page's answer: what changes for your code ---------------------------------------------


def _outcome(result: str) -> str:
    """A :func:`static_outcome` as a cell: the error's name, or that it works."""
    return f"raises `{result}`" if result.isidentifier() else "works (argument static)"


def changes_table() -> Table:
    """The page's first table: what you write, and what it does with the flag off and on, each
    cell measured on the installed JAX by the functions below."""
    cp = jax.checkpoint_policies
    both = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("hidden"))
    policies = [
        ("`policy=dots_saveable`", cp.dots_saveable),
        ('`policy=save_only_these_names("hidden")`', cp.save_only_these_names("hidden")),
        ("`policy=` a function of your own", keep_everything),
        ("`policy=save_from_both_policies(...)`", both),
        ("`policy=everything_saveable`", cp.everything_saveable),
    ]
    rows = [
        (what, *(f"keeps {_code(kept(residuals_of(p, on)))}" for on in (False, True)))
        for what, p in policies
    ]
    W, x = two_layers_inputs()
    with remat3(False):
        early = jax.checkpoint(two_layers)
    sites = []
    for on in (False, True):
        with remat3(on):
            (site,) = traced_remat_sites(early, W, x)
        sites.append(f"traces to `{site.primitive}`")
    rows.append(("`jax.checkpoint` applied before the flag is set", *sites))
    rows.append(
        (
            '`static_argnames="is_training"`, passed by position',
            *(_outcome(static_outcome(on)) for on in (False, True)),
        )
    )
    rows.append(
        (
            "a residual listing names the arguments",
            *(", ".join(f"`{a}`" for a in argument_names(on)) for on in (False, True)),
        )
    )
    header = ["what you write", "without the flag", "with `jax_remat3`"]
    return Table(header, rows, align=["left"] * 3)


# --- each point on each release of the matrix, from the committed records ---------------------

#: Each point of the guide, and what a release does: the answer when the measured test below is
#: false, then when it is true. The three policy points are measured in three values, by
#: :func:`compared`: "nothing", "the same values as without the flag", or "other values: ..."
#: naming what it keeps under the flag (the first two are the tuple's answers).
#: :func:`remat3_points` measures them; the release matrix records its answers as the fact
#: ``remat3_points`` (examples/reference/release_facts.py).
POINTS = (
    ("when `jax.checkpoint` reads the flag", "when it wraps", "when the function is called"),
    ("a plain-function policy keeps", "nothing", "the same values as without the flag"),
    ("`everything_saveable` keeps", "nothing", "the same values as without the flag"),
    ("`save_from_both_policies` keeps", "nothing", "the same values as without the flag"),
    ("`prevent_cse=False`", "ignored (barrier kept)", "passed on (no barrier)"),
    ("`static_argnames`, argument passed by position", "still traced", "static"),
    ("arguments in residual listings", "by position (`args[0]`)", "by parameter name"),
)

#: The points of :data:`POINTS` that :func:`compared` answers, by their index.
POLICY_POINTS = (1, 2, 3)


def compared(without_flag: str, with_flag: str) -> str:
    """What a policy keeps under the flag, against what it keeps without it (each a :func:`kept`
    string): nothing, the same values, or other values, named."""
    if with_flag == "nothing":
        return "nothing"
    if with_flag == without_flag:
        return "the same values as without the flag"
    return f"other values: {_code(with_flag)}"


def policy_point(policy: Callable[..., Any]) -> str:
    """:func:`compared` for what ``policy`` keeps of :func:`two_layers`, flag off and on."""
    return compared(kept(residuals_of(policy, False)), kept(residuals_of(policy, True)))


def remat3_points() -> list[str] | None:
    """The installed release's answer to each of :data:`POINTS`, measured with the flag on;
    ``None`` where the release has no ``jax_remat3`` flag."""
    if not hasattr(jax.config, "jax_remat3"):
        return None
    cp = jax.checkpoint_policies
    both = cp.save_from_both_policies(cp.dots_saveable, cp.save_only_these_names("hidden"))
    yes_no = {
        0: flag_read_at_call_time(),
        4: barriers(False, True) == 0,
        5: static_outcome(True) != "TracerBoolConversionError",
        6: argument_names(True) != [f"args[{i}]" for i in range(len(argument_names(True)))],
    }
    policies = {1: keep_everything, 2: cp.everything_saveable, 3: both}
    return [
        policy_point(policies[i]) if i in policies else (yes if yes_no[i] else no)
        for i, (_, no, yes) in enumerate(POINTS)
    ]


def release_table(records: list[dict[str, Any]]) -> Table:
    """Each point of the guide on each release the matrix recorded with the flag (the release
    records of :func:`examples.reference.releases.load_all`), read from their
    ``remat3_points`` fact; releases without the flag get no column (the caption names them)."""
    flagged = [r for r in records if r["facts"]["remat3_points"]]
    without = [r["runinfo"]["jax"] for r in records if not r["facts"]["remat3_points"]]
    rows = [
        (point, *(r["facts"]["remat3_points"][i] for r in flagged))
        for i, (point, _, _) in enumerate(POINTS)
    ]
    caption = f"No `jax_remat3` flag: jax {', '.join(without)}." if without else None
    header = ["point", *(r["runinfo"]["jax"] for r in flagged)]
    return Table(header, rows, align=["left"] * len(header), caption=caption)


def releases_answering(
    records: list[dict[str, Any]], point: int, answer: Callable[[str], bool]
) -> str:
    """The releases whose recorded answer to ``POINTS[point]`` satisfies ``answer``, as
    ``"0.10.2 and 0.11.2"`` (``"none"`` where no record does): the page's "Across releases"."""
    found: list[str] = [
        r["runinfo"]["jax"]
        for r in records
        if r["facts"].get("remat3_points") and answer(r["facts"]["remat3_points"][point])
    ]
    if not found:
        return "none"
    return found[0] if len(found) == 1 else ", ".join(found[:-1]) + " and " + found[-1]
