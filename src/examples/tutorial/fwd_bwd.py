"""What ``jax.vjp`` runs before and after the backward pass starts, side by side.

Reverse-mode autodiff splits a gradient into two programs. The *forward* program evaluates the
function and returns, besides its output, the residuals; the *backward* program takes those
residuals and a cotangent and returns the cotangents of the inputs. :func:`fwd_bwd` traces both
into jaxprs:

- forward: ``jax.make_jaxpr`` of ``x -> (f(x), residuals)``, i.e. of ``jax.vjp(f, x)`` with the
  returned VJP function flattened into the arrays it closes over;
- backward: ``jax.make_jaxpr`` of ``(residuals, cotangent) -> vjp_fn(cotangent)``.

So the forward jaxpr's outputs after the first are exactly the backward jaxpr's first inputs, and
anything recomputed (by ``jax.checkpoint``) shows up as a remat equation in the backward column.

The result renders as two ``<pre>`` columns in a notebook (they stack on a narrow screen, and take
their colours from the page's theme) and as plain text in a terminal. By default the jaxprs are
printed compactly: one line per equation, with the parameters that only matter to the compiler
(``dimension_numbers``, ``precision``, ...) left out. ``style="jax"`` prints JAX's own text.
On a page, a view whose longer column has more than ``examples.tools.display.FOLD_AFTER`` lines
folds behind a one-line summary (an HTML ``<details>``), like the site's other long listings.
"""

from __future__ import annotations

import html
import itertools
import textwrap
from collections.abc import Callable
from typing import Any, Literal

import jax
import numpy as np
from jax.extend import core as jex_core

from examples.tools import compat
from examples.tools.display import FOLD_AFTER
from examples.tools.jaxprs import open_jaxpr, primitive_counts, remat_primitive_name, sub_jaxprs

Style = Literal["compact", "jax"]

#: Parameters worth reading in the compact style; every other parameter is left out.
_SHOWN_PARAMS = ("differentiated", "policy", "name", "length", "reverse")


def fwd_bwd(f: Callable[..., Any], *args: Any, style: Style = "compact", **kwargs: Any) -> FwdBwd:
    """Trace the forward and backward programs of ``jax.vjp(f, *args, **kwargs)``.

    Arguments may be pytrees; the jaxprs take their leaves. The backward program is traced for a
    cotangent with the shape and dtype of ``f``'s output.
    """
    if style not in ("compact", "jax"):
        raise ValueError(f"style must be 'compact' or 'jax', not {style!r}")
    leaves, in_tree = jax.tree_util.tree_flatten((args, kwargs))

    def f_on_leaves(*leaves: Any) -> Any:
        a, kw = jax.tree_util.tree_unflatten(in_tree, leaves)
        return f(*a, **kw)

    def forward(*leaves: Any) -> tuple[Any, list[Any]]:
        out, vjp_fn = jax.vjp(f_on_leaves, *leaves)
        return out, jax.tree_util.tree_leaves(vjp_fn)

    out, vjp_fn = jax.vjp(f_on_leaves, *leaves)
    residuals, vjp_tree = jax.tree_util.tree_flatten(vjp_fn)
    cotangent = jax.tree_util.tree_map(lambda y: jax.ShapeDtypeStruct(y.shape, y.dtype), out)

    def backward(residuals: list[Any], cotangent: Any) -> Any:
        return jax.tree_util.tree_unflatten(vjp_tree, residuals)(cotangent)

    return FwdBwd(
        forward=jax.make_jaxpr(forward)(*leaves),
        backward=jax.make_jaxpr(backward)(residuals, cotangent),
        style=style,
    )


class FwdBwd:
    """The forward and backward jaxprs of one VJP; prints as text, displays as HTML."""

    #: Column titles, shared by the text and HTML renderings.
    TITLES = ("forward pass (jax.vjp)", "backward pass (vjp_fn(cotangent))")

    def __init__(
        self, forward: Any, backward: Any, style: Style = "compact", fold_after: int = FOLD_AFTER
    ) -> None:
        self.forward = forward  #: the forward ``ClosedJaxpr``
        self.backward = backward  #: the backward ``ClosedJaxpr``
        self.style = style
        self.remat_name = remat_primitive_name()
        #: On a page, columns longer than this many lines fold behind a one-line summary.
        self.fold_after = fold_after

    # -- what the reader asks of it ----------------------------------------------------------

    @property
    def forward_text(self) -> str:
        return _render(self.forward, self.style)

    @property
    def backward_text(self) -> str:
        return _render(self.backward, self.style)

    def count(self, primitive: str, side: Literal["forward", "backward", "both"] = "both") -> int:
        """How many equations apply ``primitive``, nested jaxprs included."""
        jaxprs = {"forward": [self.forward], "backward": [self.backward]}.get(
            side, [self.forward, self.backward]
        )
        return sum(primitive_counts(j)[primitive] for j in jaxprs)

    def remat_count(self, side: Literal["forward", "backward", "both"] = "both") -> int:
        return self.count(self.remat_name, side)

    # -- renderings --------------------------------------------------------------------------

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()

    def to_text(self, width: int = 130) -> str:
        """Two columns if they fit in ``width`` characters, else forward above backward."""
        left = [self.TITLES[0], "-" * len(self.TITLES[0]), *self.forward_text.splitlines()]
        right = [self.TITLES[1], "-" * len(self.TITLES[1]), *self.backward_text.splitlines()]
        left_width = max(map(len, left))
        gap = 4
        if left_width + gap + max(map(len, right)) > width:
            return "\n".join([*left, "", *right])
        rows = itertools.zip_longest(left, right, fillvalue="")
        return "\n".join(f"{a:<{left_width + gap}}{b}".rstrip() for a, b in rows)

    @property
    def lines(self) -> tuple[int, int]:
        """Lines of the forward and of the backward listing."""
        return len(self.forward_text.splitlines()), len(self.backward_text.splitlines())

    @property
    def folded(self) -> bool:
        return max(self.lines) > self.fold_after

    @property
    def summary(self) -> str:
        """The one line shown above a folded view."""
        forward, backward = self.lines
        remats = self.remat_count()
        recomputed = f", {remats} {self.remat_name} equations" if remats else ""
        return (
            f"forward and backward jaxprs ({forward} and {backward} lines{recomputed}; "
            "click to open)"
        )

    def _repr_html_(self) -> str:
        columns = "".join(
            _html_column(title, text, self.remat_name)
            for title, text in zip(
                self.TITLES, (self.forward_text, self.backward_text), strict=True
            )
        )
        view = (
            '<div class="remat-fwdbwd" style="display:flex;flex-wrap:wrap;gap:0.75rem;'
            'align-items:flex-start;margin:0.25rem 0;">' + columns + "</div>"
        )
        if not self.folded:
            return view
        return (
            f'<details class="remat-folded"><summary>{html.escape(self.summary)}</summary>'
            f"{view}</details>"
        )


def _html_column(title: str, text: str, remat_name: str) -> str:
    # Escape first, then mark the remat primitive: the marks are the only markup in the block.
    body = html.escape(text)
    body = body.replace(
        f"= {html.escape(remat_name)}",
        f'= <strong style="color:inherit; text-decoration:underline;">'
        f"{html.escape(remat_name)}</strong>",
    )
    longest = max((len(line) for line in text.splitlines()), default=0)
    return (
        # The column asks for as many monospace characters as its longest line: two columns sit
        # side by side when both fit, and stack when they do not. min-width:0 lets a line that
        # is still too long scroll inside its <pre> instead of widening the page.
        f'<div style="flex:1 1 calc({longest}ch + 1.8em);min-width:0;font-size:0.8em;'
        'font-family:var(--pst-font-family-monospace, monospace);">'
        '<div style="font-weight:600;font-size:1.1em;margin-bottom:0.25rem;'
        "font-family:var(--pst-font-family-base, inherit);"
        'color:var(--pst-color-text-base, inherit);">'
        f"{html.escape(title)}</div>"
        '<pre style="margin:0;padding:0.6em 0.8em;overflow-x:auto;font-size:1em;'
        "line-height:1.35;background:var(--pst-color-surface, transparent);"
        "color:var(--pst-color-text-base, inherit);"
        'border:1px solid var(--pst-color-border, rgba(127,127,127,0.4));border-radius:4px;">'
        f"{body}</pre></div>"
    )


# -- the compact printer ---------------------------------------------------------------------------


def _render(closed: Any, style: Style) -> str:
    if style == "jax":
        return str(closed)
    try:
        return _Printer().jaxpr(open_jaxpr(closed), indent=0)
    except Exception:  # pragma: no cover - a JAX release whose jaxprs this printer cannot walk
        return str(closed)


class _Printer:
    """Prints jaxprs one equation a line, naming variables a, b, ..., z, ba, bb, ... like JAX."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.counter = itertools.count()

    def _fresh(self) -> str:
        n = next(self.counter)
        letters = ""
        while True:
            letters = chr(ord("a") + n % 26) + letters
            n = n // 26
            if n == 0:
                break
        # Base 26 with digits a..z, so after z come ba, bb, ... as in JAX's own printing.
        return letters

    def var(self, v: Any) -> str:
        if isinstance(v, jex_core.Literal):
            value = np.asarray(v.val)
            return str(value.reshape(())[()]) if value.size == 1 else "<literal>"
        if isinstance(v, compat.DropVar):
            return "_"
        if v not in self.names:
            self.names[v] = self._fresh()
        return self.names[v]

    def binder(self, v: Any) -> str:
        if isinstance(v, compat.DropVar):
            return "_"
        return f"{self.var(v)}:{v.aval.str_short(short_dtypes=True)}"

    def jaxpr(self, jaxpr: Any, indent: int) -> str:
        pad = " " * indent
        consts = " ".join(self.binder(v) for v in jaxpr.constvars)
        inputs = " ".join(self.binder(v) for v in jaxpr.invars)
        head = f"{{ lambda {consts}{' ' if consts else ''}; {inputs}. let"
        lines = textwrap.wrap(head, width=72, subsequent_indent="    ", break_on_hyphens=False)
        lines = [pad + line for line in lines]
        for eqn in jaxpr.eqns:
            lines.extend(self.eqn(eqn, indent + 4))
        outputs = ", ".join(self.var(v) for v in jaxpr.outvars)
        lines.append(f"{pad}  in ({outputs}{',' if len(jaxpr.outvars) == 1 else ''}) }}")
        return "\n".join(lines)

    def eqn(self, eqn: Any, indent: int) -> list[str]:
        pad = " " * indent
        operands = " ".join(self.var(v) for v in eqn.invars)
        shown = [
            f"{k}={_short(v)}"
            for k, v in eqn.params.items()
            if k in _SHOWN_PARAMS and not any(True for _ in sub_jaxprs(v))
        ]
        params = f"[{' '.join(shown)}]" if shown else ""
        nested = [sub for v in eqn.params.values() for sub in sub_jaxprs(v)]
        outputs = " ".join(self.binder(v) for v in eqn.outvars)
        line = f"{pad}{outputs} = {eqn.primitive.name}{params} {operands}".rstrip()
        if params and len(line) > 72:  # parameters on a line of their own, under the equation
            line = f"{pad}{outputs} = {eqn.primitive.name} {operands}\n{pad}    {params}"
        lines = [line]
        for sub in nested:
            lines.append(self.jaxpr(open_jaxpr(sub), indent + 4))
        return lines


def _short(value: Any) -> str:
    text = getattr(value, "__name__", None) or repr(value)
    return text if len(text) <= 48 else text[:45] + "..."
