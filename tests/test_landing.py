"""The landing page's trade-off: the relations its prose states, on the page's own sizes."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import numpy as np
import pytest

from examples.landing import PREDICTED_FULL_REMAT_FLOPS, STRATEGIES, measure, table
from examples.tools.measure import compiled_stats
from examples.tools.models import scan_loss, stacked_mlp
from examples.tools.residuals import saved_residuals


@pytest.fixture(scope="module")
def page_rows():
    return measure()  # the sizes the page measures


def test_full_remat_costs_close_to_what_counting_products_predicts(page_rows):
    plain, _, nothing = page_rows
    assert plain.strategy == "no checkpoint"
    assert plain.relative_flops == 1.0
    assert pytest.approx((2 + 4 + 1) / (2 + 4)) == PREDICTED_FULL_REMAT_FLOPS
    assert nothing.relative_flops == pytest.approx(PREDICTED_FULL_REMAT_FLOPS, abs=0.03)
    assert nothing.temp_bytes < plain.temp_bytes


@pytest.mark.cpu_figures
def test_keeping_the_products_lands_in_between_at_almost_no_extra_cost(page_rows):
    plain, dots, nothing = page_rows
    assert nothing.temp_bytes < dots.temp_bytes < plain.temp_bytes
    assert 1.0 <= dots.relative_flops < 1.02


def test_the_middle_point_is_structural():
    """Per block, the plain gradient keeps the pre-activation and more of the same size; the
    products policy keeps the pre-activation alone; keeping nothing keeps only the inputs."""
    weights, x = stacked_mlp(depth=1, batch=8, width=16)
    one = {k: v[0] for k, v in weights.items()}
    kept = {
        name: saved_residuals(lambda h, p, f=f: f(h, p).sum(), x, one).excluding_arguments()
        for name, f in STRATEGIES.items()
    }
    hidden = (8, 64)
    plain, dots, nothing = kept.values()
    assert [(r.primitive, r.shape) for r in dots] == [("dot_general", hidden)]
    assert ("dot_general", hidden) in [(r.primitive, r.shape) for r in plain]
    assert sum(r.shape == hidden for r in plain) >= 3  # pre-activation and GELU's intermediates
    assert (8, 16) in [r.shape for r in plain]  # the normalized input of the first product
    assert len(nothing) == 0


def test_the_visible_call_gives_the_measured_figures(page_rows):
    weights, x = stacked_mlp()
    loss = scan_loss(STRATEGIES["checkpoint, keep matmuls"])
    compiled = jax.jit(jax.grad(loss)).lower(weights, x).compile()
    assert compiled.memory_analysis().temp_size_in_bytes == page_rows[1].temp_bytes


def test_the_flop_count_is_one_blocks_whatever_the_depth():
    # The page: the cost analysis counts the scan body once, so the printed figure is one
    # block's forward and backward pass, the same for 4 blocks as for 16.
    def flops(depth):
        weights, x = stacked_mlp(depth=depth)
        loss = scan_loss(STRATEGIES["checkpoint, keep matmuls"])
        return compiled_stats(jax.grad(loss), weights, x).flops

    assert flops(4) == pytest.approx(flops(16), rel=0.01)


@pytest.mark.cpu_figures
def test_checkpointing_uses_less_memory_and_more_flops_at_another_size():
    plain, dots, nothing = measure(depth=8, batch=32, width=64)
    assert nothing.temp_bytes < dots.temp_bytes < plain.temp_bytes
    assert nothing.flops > dots.flops >= plain.flops


def test_the_whole_step_adds_the_same_weights_and_gradients_to_every_strategy(page_rows):
    # The page: arguments (weights, input) and outputs (the weights' gradients) are counted apart
    # from the temporaries, are the same for every strategy, and here outweigh the temporaries.
    weights, x = stacked_mlp()
    weight_bytes = sum(w.nbytes for w in weights.values())
    (io,) = {r.io_bytes for r in page_rows}
    assert 0 <= io - (2 * weight_bytes + x.nbytes) <= 64  # and the outputs' table of addresses
    plain, _, nothing = page_rows
    assert plain.io_bytes > plain.temp_bytes
    assert nothing.temp_bytes / plain.temp_bytes < nothing.step_bytes / plain.step_bytes < 1


def test_the_temporaries_grow_with_the_batch_and_the_weights_do_not():
    small, large = (measure(depth=4, batch=b)[0] for b in (64, 256))
    assert large.temp_bytes > 3 * small.temp_bytes
    x_bytes = stacked_mlp(depth=4, batch=64)[1].nbytes
    assert large.io_bytes - small.io_bytes == 3 * x_bytes  # only the input grows


def test_jax_remat_is_the_same_transformation_under_another_name():
    # The page: jax.remat is jax.checkpoint's other name; on some releases the same object, on
    # others a separate function whose options are a subset (the migration notes' table).
    import inspect

    if jax.remat is not jax.checkpoint:
        remat = set(inspect.signature(jax.remat).parameters)
        assert remat <= set(inspect.signature(jax.checkpoint).parameters)


def test_table_rows(page_rows):
    t = table(page_rows)
    assert t.column("strategy") == list(STRATEGIES)
    assert t.column("FLOPs vs. no checkpoint")[0] == "1.00×"


def _loss_float64(weights, x):
    """The loss in NumPy float64 (GELU in its tanh form, as jax.nn.gelu computes by default)."""
    h = np.asarray(x, np.float64)
    for w1, w2 in zip(*(np.asarray(weights[k], np.float64) for k in ("w1", "w2")), strict=True):
        n = h / np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + 1e-6)
        z = n @ w1
        g = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z**3)))
        h = h + g @ w2
    return np.mean(h**2)


def test_gradients_do_not_depend_on_the_strategy():
    weights, x = stacked_mlp(depth=3, batch=4, width=8)
    with jax.default_matmul_precision("highest"):
        np.testing.assert_allclose(
            scan_loss(STRATEGIES["no checkpoint"])(weights, x), _loss_float64(weights, x), rtol=1e-5
        )
        grads = [jax.grad(scan_loss(fn))(weights, x) for fn in STRATEGIES.values()]
    for other in grads[1:]:
        for k in ("w1", "w2"):
            np.testing.assert_allclose(grads[0][k], other[k], rtol=1e-5, atol=1e-6)


# --- The page's text --------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"
LANDING = (DOCS / "index.md").read_text(encoding="utf-8")


def _first_screen() -> str:
    """The landing's text from after the banner cell to its first section heading."""
    start = LANDING.index("banner()\n```")
    return LANDING[start : LANDING.index("\n## ", start)]


#: The reader's situations and the pages that answer them (issue 45 item 1).
ANSWERS = [
    "tutorial/gradient-checkpointing.md",
    "howto/scan-transformer.md",
    "howto/choose-policy.md",
    "howto/will-it-fit.md",
    "howto/when-remat-goes-wrong.md",
    "questions.md",
    "reference/releases.md",
    "problems/index.md",
]


def test_the_first_screen_sends_each_situation_to_the_page_that_answers_it():
    first = _first_screen()
    links = re.findall(r"\]\(([^)#\s]+\.md)\)", first)
    for target in ANSWERS:
        assert target in links, f"the landing's first screen does not link {target}"
    for target in links:
        assert (DOCS / target).is_file(), target
    # Out of memory goes to the how-to index's first aid, a label that must exist there.
    assert "<howto-first-aid>`" in first
    assert "(howto-first-aid)=" in (DOCS / "howto" / "index.md").read_text(encoding="utf-8")
    # One sentence of advice per situation, short enough for the first screen of a phone.
    items = re.findall(r"^- \*\*.*?(?=^- |\Z)", first, re.S | re.M)
    assert len(items) >= 6
    assert all(len(item.split()) <= 45 for item in items), [len(i.split()) for i in items]


def test_the_grid_has_cards_for_the_how_to_guides_and_the_questions():
    cards = re.findall(r"^:link: (\S+)$", LANDING, re.M)
    assert {"howto/index", "questions", "tutorial/gradient-checkpointing"} <= set(cards)
    for card in cards:
        assert (DOCS / f"{card}.md").is_file(), card


def test_the_figure_has_alt_text_that_says_what_it_shows():
    cell = next(c for c in LANDING.split("```{code-cell}") if "plot(rows)" in c)
    alt = re.search(r'^:mystnb: \{image: \{alt: "([^"]+)"\}\}$', cell, re.M)
    assert alt is not None, "the figure's cell gives no alt text"
    for strategy in STRATEGIES:
        assert strategy.split(", ")[-1] in alt.group(1)
    assert "memory" in alt.group(1)
    assert "FLOPs" in alt.group(1)
