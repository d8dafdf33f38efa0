"""The forward/backward viewer: what lands in which column, and safe HTML."""

from __future__ import annotations

import html
import re

import jax
import jax.numpy as jnp
import pytest

from examples.tools.jaxprs import primitive_counts, remat_primitive_name
from examples.tutorial import recursive as R
from examples.tutorial import traced as T
from examples.tutorial.fwd_bwd import FwdBwd, fwd_bwd


def _lines_with(text, primitive):
    return [line for line in text.splitlines() if re.search(rf"= {primitive}\b", line)]


def test_remat_name_is_detected_from_a_trace():
    name = remat_primitive_name()
    jaxpr = jax.make_jaxpr(jax.checkpoint(jnp.sin))(1.0)
    assert name == jaxpr.jaxpr.eqns[0].primitive.name
    assert name in {"remat2", "checkpoint", "remat"}


def test_plain_chain_computes_cosines_forward_and_none_backward():
    view = fwd_bwd(T.f, *T.chain_inputs())
    assert view.count("sin", "forward") == 3
    assert view.count("cos", "forward") == 3
    assert view.count("sin", "backward") == view.count("cos", "backward") == 0
    assert view.remat_count() == 0
    assert len(_lines_with(view.forward_text, "cos")) == 3
    assert not _lines_with(view.backward_text, "cos")


def test_policy_moves_sines_and_cosines_to_the_backward_column():
    view = fwd_bwd(T.f_dots_saveable, *T.chain_inputs())
    assert view.count("cos", "forward") == 0
    assert view.count("cos", "backward") == 3
    assert view.count("sin", "backward") == 2  # the output's sine is not needed again
    assert view.remat_count("backward") == 1
    assert _lines_with(view.backward_text, remat_primitive_name())
    assert not _lines_with(view.forward_text, remat_primitive_name())


def test_forward_outputs_are_the_backward_inputs():
    x = jnp.float32(2.0)
    view = fwd_bwd(R.recursive_checkpoint([jnp.sin] * 8), x)
    n_residuals = len(view.forward.jaxpr.outvars) - 1
    assert len(view.backward.jaxpr.invars) == n_residuals + 1  # residuals, then the cotangent


@pytest.mark.parametrize("style", ["compact", "jax"])
def test_both_styles_name_the_same_primitives(style):
    view = fwd_bwd(R.recursive_checkpoint([jnp.sin] * 4), 3.0, style=style)
    for primitive in ("sin", "cos", remat_primitive_name()):
        assert primitive in view.backward_text
    assert "cos" in view.forward_text


def test_text_has_two_columns_or_stacks():
    view = fwd_bwd(jnp.sin, 1.0)
    wide = view.to_text(width=200)
    assert wide.splitlines()[0].startswith(FwdBwd.TITLES[0])
    assert FwdBwd.TITLES[1] in wide.splitlines()[0]
    narrow = view.to_text(width=20)
    assert narrow.splitlines()[0] == FwdBwd.TITLES[0]
    assert FwdBwd.TITLES[1] in narrow.splitlines()
    assert str(view) == repr(view) == view.to_text()


def test_html_is_escaped_and_marks_remat():
    view = fwd_bwd(T.f_dots_saveable, *T.chain_inputs())
    page = view._repr_html_()
    assert page.count("<pre") == 2
    # DotsSaveable(...) and jaxpr braces survive as text; any '<' inside a <pre> is markup we made.
    for block in re.findall(r"<pre[^>]*>(.*?)</pre>", page, flags=re.S):
        stripped = re.sub(r"</?strong[^>]*>", "", block)
        assert "<" not in stripped
        assert html.unescape(stripped) in (
            view.forward_text,
            view.backward_text,
        )
    assert f">{remat_primitive_name()}</strong>" in page
    assert "var(--pst-color-surface" in page
    assert "flex-wrap:wrap" in page


def test_html_escapes_angle_brackets_from_jaxpr_text():
    view = fwd_bwd(R.recursive_checkpoint([jnp.sin] * 4), 3.0)
    view.style = "jax"
    # Force markup-like text through the renderer: a literal '<' in the jaxpr text must be escaped.
    original = FwdBwd.forward_text
    try:
        FwdBwd.forward_text = property(lambda self: "a < b && <script>")
        page = view._repr_html_()
    finally:
        FwdBwd.forward_text = original
    assert "<script>" not in page
    assert "a &lt; b &amp;&amp; &lt;script&gt;" in page


def test_primitive_counts_walk_nested_jaxprs():
    closed = jax.make_jaxpr(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x))))(1.0)
    counts = primitive_counts(closed)
    assert counts["sin"] == 2
    assert counts[remat_primitive_name()] == 1


def test_rejects_unknown_style():
    with pytest.raises(ValueError, match="style"):
        fwd_bwd(jnp.sin, 1.0, style="rich")


def test_a_long_view_folds_behind_a_summary():
    short = fwd_bwd(T.f, *T.chain_inputs())
    assert not short.folded
    assert "<details" not in short._repr_html_()
    long = fwd_bwd(R.recursive_checkpoint([jnp.sin] * 8), 3.0)
    assert max(long.lines) > long.fold_after
    assert long.folded
    page = long._repr_html_()
    assert page.startswith('<details class="remat-folded"><summary>')
    assert f"{long.lines[0]} and {long.lines[1]} lines" in page
    assert f"{long.remat_count()} {remat_primitive_name()} equations" in long.summary
    assert page.count("<pre") == 2  # both columns are still inside
    # The text rendering is never folded.
    assert long.to_text().startswith(FwdBwd.TITLES[0])
