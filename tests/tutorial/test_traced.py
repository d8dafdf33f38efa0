"""The tutorial's examples: what each variant saves, and that none of them changes a gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.tools.residuals import saved_residuals
from examples.tutorial import traced as T
from examples.tutorial.fwd_bwd import fwd_bwd

# -- independent float64 references ---------------------------------------------------------------


def _chain_value_and_grads_np(Ws, x):
    """f = g3 o g2 o g1 with g(W, x) = sin(W x), and its gradient of sum(f), by hand in NumPy."""
    Ws = [np.asarray(W, np.float64) for W in Ws]
    h = np.asarray(x, np.float64)
    pre, inputs = [], []
    for W in Ws:
        inputs.append(h)
        pre.append(W @ h)
        h = np.sin(pre[-1])
    bar = np.ones_like(h)  # d sum(f) / d f
    grads = []
    for W, z, inp in zip(reversed(Ws), reversed(pre), reversed(inputs), strict=True):
        z_bar = bar * np.cos(z)
        grads.append(np.outer(z_bar, inp))
        bar = W.T @ z_bar
    return h, [*reversed(grads), bar]


def _random_chain_inputs(seed=0):
    rng = np.random.default_rng(seed)
    shapes = [(5, 4), (6, 5), (7, 6), (4,)]
    return [jnp.asarray(rng.normal(size=s) * 0.5, jnp.float32) for s in shapes]


CHAIN_VARIANTS = {
    "plain": T.f,
    "checkpoint each": T.f_checkpoint_each,
    "dots policy": T.f_dots_saveable,
    "named": T.f_named,
    "keep a": T.f_keep_a,
}


@pytest.mark.parametrize("name", CHAIN_VARIANTS)
def test_chain_value_and_gradient_match_numpy_float64(name):
    fn = CHAIN_VARIANTS[name]
    args = _random_chain_inputs()
    value, grads = _chain_value_and_grads_np(args[:3], args[3])
    np.testing.assert_allclose(fn(*args), value, rtol=1e-5, atol=1e-6)
    ours = jax.grad(lambda *a: jnp.sum(fn(*a)), argnums=(0, 1, 2, 3))(*args)
    for got, want in zip(ours, grads, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _describe(residuals):
    return [(r.kind, r.detail, r.shape) for r in residuals]


ARGS = [
    ("argument", n, s) for n, s in [("W1", (5, 4)), ("W2", (6, 5)), ("W3", (7, 6)), ("x", (4,))]
]


def test_plain_chain_saves_sines_and_cosines():
    listing = saved_residuals(T.f, *T.chain_inputs())
    assert _describe(listing) == [
        *ARGS,
        ("output", "sin", (5,)),
        ("output", "cos", (5,)),
        ("output", "sin", (6,)),
        ("output", "cos", (6,)),
        ("output", "cos", (7,)),  # the last sine is the output: the backward pass needs no copy
    ]
    assert all(r.dtype == np.float32 for r in listing)


def test_checkpointing_each_stage_keeps_only_stage_inputs():
    listing = saved_residuals(T.f_checkpoint_each, *T.chain_inputs())
    assert _describe(listing) == [*ARGS, ("output", "sin", (5,)), ("output", "sin", (6,))]
    assert not any(r.primitive == "cos" for r in listing)


def test_dots_policy_keeps_the_three_matrix_products():
    listing = saved_residuals(T.f_dots_saveable, *T.chain_inputs())
    computed = listing.excluding_arguments()
    assert [r.shape for r in computed] == [(5,), (6,), (7,)]
    # Today's JAX names the value dot_general (older JAX listed reduce_precision).
    assert {r.primitive for r in computed} == {"dot_general"}


def test_save_only_a_keeps_one_named_value():
    listing = saved_residuals(T.f_keep_a, *T.chain_inputs())
    assert _describe(listing) == [*ARGS, ("named", "a", (5,))]


def test_remat_and_checkpoint_trace_to_the_same_program():
    facts = T.remat_vs_checkpoint()
    # One function object up to 0.7, two functions since 0.8 (release records); the page only
    # says that both name the same transformation and links the notes for the signatures.
    assert facts["same_object"] is (jax.remat is jax.checkpoint)
    assert facts["same_jaxpr"] is True
    if not facts["same_object"]:
        # jax.remat's signature is a subset of jax.checkpoint's.
        assert set(facts["remat_lacks"]) <= {"static_argnames", "concrete"}
        assert facts["checkpoint_prevent_cse"].startswith("bool")
        assert facts["remat_prevent_cse"].startswith("bool")
    x = jnp.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(
        jax.grad(lambda v: jnp.sum(jax.remat(jnp.sin)(v)))(x), np.cos(np.asarray(x)), rtol=1e-6
    )


def test_page_policy_cell_matches_the_module():
    page = jax.checkpoint(T.f, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    args = T.chain_inputs()
    assert _describe(saved_residuals(page, *args)) == _describe(
        saved_residuals(T.f_dots_saveable, *args)
    )


def test_dots_policy_forward_passes_products_through_reduce_precision():
    view = fwd_bwd(T.f_dots_saveable, *T.chain_inputs())
    assert view.count("reduce_precision", "forward") == 3
    assert view.count("cos", "forward") == 0


# -- fundamentals ---------------------------------------------------------------------------------


@pytest.mark.parametrize("vjp", [T.sin_vjp_save_cos, T.sin_vjp_recompute_cos])
def test_both_sin_vjps_agree_with_jax_vjp(vjp):
    x = jnp.linspace(-3.0, 3.0, 11)
    ct = jnp.linspace(0.5, 1.5, 11)
    y, back = vjp(x)
    y_ref, back_ref = jax.vjp(jnp.sin, x)
    np.testing.assert_allclose(y, y_ref, rtol=1e-6)
    np.testing.assert_allclose(back(ct), back_ref(ct)[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(back(ct), ct * np.cos(np.asarray(x, np.float64)), rtol=1e-5)


def test_composition_listings():
    x = jnp.linspace(0.1, 1.0, 3)
    kinds = {
        name: [(r.kind, r.detail) for r in saved_residuals(fn, x)]
        for name, fn in T.composition_variants().items()
    }
    assert kinds["no checkpoint"] == [("output", "cos")] * 4
    # g's two cosines are replaced by its input, which is an argument anyway.
    assert kinds["checkpoint g (first stage)"] == [("argument", "x"), *[("output", "cos")] * 2]
    # h's cosines are replaced by h's input (a sine computed by g): g's cosines stay.
    assert sorted(kinds["checkpoint h (last stage)"]) == sorted(
        [("output", "cos"), ("output", "cos"), ("output", "sin")]
    )
    assert kinds["checkpoint h o g (everything)"] == [("argument", "x")]


def test_composition_gradients_do_not_depend_on_placement():
    x = jnp.linspace(-2.0, 2.0, 7)
    xs = np.asarray(x, np.float64)
    # d/dx sin^4(x) = prod of cos along the chain
    want = np.cos(xs) * np.cos(np.sin(xs))
    want = want * np.cos(np.sin(np.sin(xs))) * np.cos(np.sin(np.sin(np.sin(xs))))
    for fn in T.composition_variants().values():
        np.testing.assert_allclose(jax.grad(lambda v, fn=fn: jnp.sum(fn(v)))(x), want, rtol=1e-5)


def test_checkpoint_by_hand_keeps_what_jax_checkpoint_keeps():
    x = jnp.linspace(-1.5, 1.5, 5)
    with_jax = lambda v: T.stage_h(jax.checkpoint(T.stage_g)(v))
    by_hand = lambda v: T.stage_h(T.checkpoint_by_hand(T.stage_g)(v))
    assert _describe(saved_residuals(with_jax, x)) == _describe(saved_residuals(by_hand, x))
    xs = np.asarray(x, np.float64)
    want = np.cos(xs) * np.cos(np.sin(xs))
    want = want * np.cos(np.sin(np.sin(xs))) * np.cos(np.sin(np.sin(np.sin(xs))))
    for fn in (with_jax, by_hand):
        np.testing.assert_allclose(jax.grad(lambda v, fn=fn: jnp.sum(fn(v)))(x), want, rtol=1e-5)


def test_checkpoint_by_hand_on_the_chain_matches_per_stage_checkpoints():
    def f_by_hand(W1, W2, W3, x):
        stage = T.checkpoint_by_hand(T.g)
        return stage(W3, stage(W2, stage(W1, x)))

    args = _random_chain_inputs(3)
    assert _describe(saved_residuals(f_by_hand, *args)) == _describe(
        saved_residuals(T.f_checkpoint_each, *args)
    )
    _, want = _chain_value_and_grads_np(args[:3], args[3])
    got = jax.grad(lambda *a: jnp.sum(f_by_hand(*a)), argnums=(0, 1, 2, 3))(*args)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_checkpoint_acts_on_linearize_not_on_jvp():
    two_sines = lambda x: jnp.sin(jnp.sin(x))
    x = jnp.linspace(0.1, 1.0, 3)
    plain = T.jvp_and_linearize(two_sines, x)
    checkpointed = T.jvp_and_linearize(jax.checkpoint(two_sines), x)
    # jvp: the same sines and cosines, nothing recomputed.
    assert plain["jvp_sin_cos"] == checkpointed["jvp_sin_cos"] == 4
    # linearize: the plain linear function closes over two cosines and evaluates none; the
    # checkpointed one closes over the input and recomputes a sine and two cosines.
    assert (plain["linear_sin_cos"], plain["linear_consts"]) == (0, 2)
    assert (checkpointed["linear_sin_cos"], checkpointed["linear_consts"]) == (3, 1)
    table = T.jvp_linearize_table(two_sines, x)
    assert table.column("sin + cos in the linear function") == ["0", "3"]
    # and the tangents agree
    t = jnp.ones_like(x)
    np.testing.assert_allclose(
        jax.jvp(two_sines, (x,), (t,))[1], jax.jvp(jax.checkpoint(two_sines), (x,), (t,))[1]
    )


def test_composition_peaks_favour_the_first_stage():
    peaks = T.composition_peaks(jnp.linspace(0.1, 1.0, 3))
    none = peaks["no checkpoint"]
    assert peaks["checkpoint g (first stage)"] < none  # "the peak drops"
    assert peaks["checkpoint h (last stage)"] == none  # "the plain one"
    assert peaks["checkpoint h o g (everything)"] == none


def test_separate_checkpoints_on_each_stage_but_the_last_give_the_lowest_peak():
    # The page's rule of thumb: each stage but the last in its own checkpoint, not one checkpoint
    # around the prefix (which rebuilds both stages at once).
    rows = T.placement_rows(jnp.linspace(0.1, 1.0, 3))
    peak = {r.placement: r.peak for r in rows}
    assert T.placement_best(rows) == "`f1 and f2`"
    assert peak["f1 and f2"] < peak["f2 o f1"] < peak["none"]
    assert peak["f3 (last)"] == peak["f3 o f2 o f1 (all)"] == peak["none"]


def test_placement_rows_kept_recomputed_and_peak():
    rows = {r.placement: r for r in T.placement_rows(jnp.ones(3))}
    none = rows["none"]
    assert (none.kept, none.recomputed_sines) == (6, 0)
    # Checkpointing everything keeps nothing but recomputes every sine but the output's.
    assert (rows["f3 o f2 o f1 (all)"].kept, rows["f3 o f2 o f1 (all)"].recomputed_sines) == (0, 5)
    for name in ("f1", "f2", "f2 o f1", "f1 and f2", "f3 (last)"):
        assert rows[name].kept < none.kept
        assert rows[name].recomputed_sines >= 1
    # The page's sentence: f1, f2, both and f2 o f1 recompute 1, 1, 2 and 3 sines.
    prefixes = ("f1", "f2", "f1 and f2", "f2 o f1")
    assert [rows[name].recomputed_sines for name in prefixes] == [1, 1, 2, 3]
    # The rule of thumb: prefixes lower the peak, the last stage and the whole chain do not.
    for name in ("f1", "f2", "f2 o f1", "f1 and f2"):
        assert rows[name].peak < none.peak, name
    assert rows["f3 (last)"].peak == none.peak
    assert rows["f3 o f2 o f1 (all)"].peak == none.peak
    table = T.placement_table(list(rows.values()))
    assert table.header[-1] == "peak (values held)"
    assert len(table.rows) == 7


def test_a_policy_allows_but_only_needed_values_are_saved():
    x = jnp.linspace(0.0, 1.0, 5)
    everything = jax.checkpoint(
        T.only_what_is_needed, policy=jax.checkpoint_policies.everything_saveable
    )
    listing = saved_residuals(everything, x)
    assert [(r.kind, r.detail) for r in listing] == [("output", "cos"), ("output", "mul")]
    # Without any checkpoint, autodiff keeps the same two computed values.
    plain = saved_residuals(T.only_what_is_needed, x).of_kind("output")
    assert _describe(listing) == _describe(plain)
    np.testing.assert_allclose(
        jax.grad(everything)(x), jax.grad(T.only_what_is_needed)(x), rtol=1e-6
    )
    xs = np.asarray(x, np.float64)
    np.testing.assert_allclose(
        jax.grad(T.only_what_is_needed)(x), 8 * np.sin(xs + 1) * np.cos(xs + 1), rtol=1e-5
    )


# -- policies on the model ------------------------------------------------------------------------


def _loss_np(params, x, y):
    h = np.asarray(x, np.float64)
    Ps = [np.asarray(p, np.float64) for p in params]
    for W in Ps[:-1]:
        h = np.sin(W @ h)
    return np.sum((Ps[-1] @ h - np.asarray(y, np.float64)) ** 2)


def test_model_residuals_per_policy():
    params, x, y = T.model_inputs()
    plain = saved_residuals(T.loss, params, x, y).excluding_arguments()
    assert [r.primitive for r in plain] == ["sin", "cos", "sin", "cos", "mul"]
    dots = saved_residuals(
        jax.checkpoint(T.loss, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable),
        params,
        x,
        y,
    ).excluding_arguments()
    assert [r.primitive for r in dots] == ["dot_general"] * 3
    named = saved_residuals(T.loss_named, params, x, y).excluding_arguments()
    assert [r.name for r in named if r.kind == "named"] == ["layer0_output", "layer1_output"]
    but_layer1 = saved_residuals(
        jax.checkpoint(
            T.loss_named, policy=jax.checkpoint_policies.save_any_names_but_these("layer1_output")
        ),
        params,
        x,
        y,
    ).excluding_arguments()
    assert all(r.kind == "named" for r in but_layer1)
    assert "layer1_output" not in {r.name for r in but_layer1}


def test_model_gradients_match_across_policies():
    rng = np.random.default_rng(1)
    params = [jnp.asarray(rng.normal(size=(4, 4)) * 0.5, jnp.float32) for _ in range(3)]
    x, y = (jnp.asarray(rng.normal(size=4), jnp.float32) for _ in range(2))
    np.testing.assert_allclose(T.loss(params, x, y), _loss_np(params, x, y), rtol=1e-5)
    cp = jax.checkpoint_policies
    variants = [
        T.loss,
        T.loss_named,
        jax.checkpoint(T.loss, policy=cp.dots_with_no_batch_dims_saveable),
        jax.checkpoint(T.loss_named, policy=cp.save_any_names_but_these("layer1_output")),
        jax.checkpoint(T.loss_named, policy=cp.save_only_these_names("layer0_output")),
        jax.checkpoint(T.loss),
    ]
    grads = [jax.grad(v)(params, x, y) for v in variants]
    for other in grads[1:]:
        for a, b in zip(grads[0], other, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_policy_table_marks_the_missing_name():
    table = {name: exists for name, exists, _ in T.policy_rows()}
    assert table.pop("save_anything_but_these_names") is False
    assert all(table.values()), table
    assert jax.checkpoint_policies.checkpoint_dots is jax.checkpoint_policies.dots_saveable
    rendered = T.policy_table().to_markdown()
    assert "| `save_anything_but_these_names` | **no** |" in rendered


def test_dots_saveable_keeps_convolutions_as_the_table_says():
    """The table's note for dots_saveable names convolutions as well as matrix products."""
    assert "convolutions" in T.POLICY_NOTES["dots_saveable"]

    def conv_layer(x, k):
        return jnp.sum(jnp.sin(jax.lax.conv(x, k, (1, 1), "SAME")))

    f = jax.checkpoint(conv_layer, policy=jax.checkpoint_policies.dots_saveable)
    kept = saved_residuals(f, jnp.ones((1, 1, 4, 4)), jnp.ones((1, 1, 3, 3)))
    assert [r.primitive for r in kept.of_kind("output")] == ["conv_general_dilated"]


def test_a_checkpoint_keeps_only_the_inputs_its_backward_pass_reads():
    """The tutorial: `y` is kept because the loss's VJP reads it, not because every input is."""

    def added(x, y):
        return jnp.sum(jnp.sin(x) + y)

    def multiplied(x, y):
        return jnp.sum(jnp.sin(x) * y)

    x = y = jnp.ones(3)
    assert [r.argument for r in saved_residuals(jax.checkpoint(added), x, y)] == ["x"]
    assert sorted(r.argument for r in saved_residuals(jax.checkpoint(multiplied), x, y)) == [
        "x",
        "y",
    ]


def test_save_anything_except_these_names_against_everything_saveable():
    cp = jax.checkpoint_policies
    args = T.chain_inputs()
    excluded = saved_residuals(
        jax.checkpoint(T.f_named, policy=cp.save_anything_except_these_names("a")), *args
    )
    everything = saved_residuals(jax.checkpoint(T.f_named, policy=cp.everything_saveable), *args)
    # The page glues except_names_keeps_the_name() and words its sentence from it: up to 0.9 the
    # policy dropped the name (release records), from 0.10 on it keeps it like everything_saveable.
    if T.except_names_keeps_the_name("a"):
        assert _describe(excluded) == _describe(everything)
    else:
        assert "a" not in {r.name for r in excluded}
        assert "a" in {r.name for r in everything}


def test_except_names_verdict_compares_kept_bytes_with_everything_saveable():
    cp = jax.checkpoint_policies
    args = T.chain_inputs()
    excluded = saved_residuals(
        jax.checkpoint(T.f_named, policy=cp.save_anything_except_these_names("a")), *args
    )
    everything = saved_residuals(jax.checkpoint(T.f_named, policy=cp.everything_saveable), *args)
    verdict = T.except_names_verdict("a")
    if excluded.nbytes < everything.nbytes:
        assert verdict.startswith("keeps fewer bytes")
    elif "a" in {r.name for r in excluded}:
        assert verdict.startswith("still lists a")
    else:
        # 0.9 and older: the name leaves the listing, the same array stays under its primitive.
        assert verdict.startswith("no longer lists a, yet keeps every byte")
    # In f_named the array named a is the second stage's input: no release drops its bytes.
    assert excluded.nbytes == everything.nbytes


@pytest.mark.cpu_figures
@pytest.mark.parametrize("page", ["gradient-checkpointing", "how-remat-works"])
def test_every_glued_key_on_the_page_is_glued(page):
    """Each {glue:text}`key` of the tutorial's two pages is glued by a cell or by a facts
    function.

    Partial builds (REMAT_GUIDE_EXECUTE_ONLY) silence missing-glue warnings, so this keeps a
    misspelt key from rendering as nothing.
    """
    import re
    from pathlib import Path

    from examples.tools.models import Config
    from examples.tutorial import block as B
    from examples.tutorial import compiled as J
    from examples.tutorial import patterns as S
    from examples.tutorial import when_not as N

    text = (Path(__file__).parents[2] / f"docs/tutorial/{page}.md").read_text()
    used = set(re.findall(r"\{glue:text\}`([A-Za-z_0-9]+)(?::[^`]*)?`", text))
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", text, re.S)
    in_cells = {k for c in cells if "glue(" in c for k in re.findall(r'"([a-z_]+)"', c)}
    scan = J.scan_rows(2, 8, 16)
    facts = {
        **J.scan_facts(scan, J.flops_by_depth((2, 4), 8, 16)),
        **J.straight_line_facts(J.straight_line_rows(2, 8, 16)),
        **N.not_worth_it_facts(N.not_worth_it_rows(2, 8, 16)),
        **S.nested_facts(S.nested_rows(4, 8, 16, groups=(2, 4)), 4),
        **B.policy_facts(B.policy_rows(Config(layers=2, batch=1, seq=4, width=8, heads=2))),
    }
    missing = used - in_cells - set(facts)
    assert not missing, f"glued on the page but never glued: {sorted(missing)}"
    assert used, "the page glues nothing"


def test_the_policy_table_holds_some_of_the_public_names_and_the_missing_one():
    # The page: the table holds the names the tutorial uses, not all of them; the ones it leaves
    # out include offloading policies and the combinator.
    from examples.tools.compat import policy_names

    public = set(policy_names())
    left_out = public - set(T.POLICY_NOTES)
    assert left_out
    assert "save_from_both_policies" in left_out
    assert any("offload" in name for name in left_out)
    missing = [name for name, present, _ in T.policy_rows() if not present]
    assert missing == ["save_anything_but_these_names"]


def test_print_residuals_prints_jaxs_lines_naming_the_product(capsys):
    # The page: print_residuals prints the lines JAX's newer releases print; where an older
    # release names a kept product's reduce_precision, it names the dot_general.
    from jax.ad_checkpoint import print_saved_residuals

    args = T.chain_inputs()
    print_saved_residuals(T.f_dots_saveable, *args)
    theirs = [line.split(" from ")[0] for line in capsys.readouterr().out.splitlines()]
    ours = [
        line.split(" from ")[0]
        for line in str(saved_residuals(T.f_dots_saveable, *args)).splitlines()
    ]
    assert len(ours) == len(theirs) > 3
    assert ours == [line.replace("reduce_precision", "dot_general") for line in theirs]
