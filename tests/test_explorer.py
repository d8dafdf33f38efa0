"""examples.explorer: measurements consistent with each other and with theory; data round-trips."""

from __future__ import annotations

import collections
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name

from examples import explorer as e
from examples import policies
from examples.explorer.__main__ import main
from examples.explorer.render import FLOPS, FLOPS_WITHOUT_PRODUCTS, MEDIAN_ONLY
from examples.measure import Timing
from examples.models import SIZES, Config, init_inputs, init_params
from examples.residuals import saved_residuals
from examples.runinfo import collect

TINY = SIZES["tiny"]
DATA = e.RUNS
P = jax.checkpoint_policies


@pytest.fixture(scope="module")
def results():
    """Three policies on the tiny model, compiled but not timed (the CLI test times two)."""
    names = [e.NO_REMAT, "dots_saveable", "nothing_saveable"]
    return {r.policy: r for r in e.measure(TINY, names, time_steps=False)}


def _kept_per_layer(cfg, policy):
    params, x = init_params(cfg), init_inputs(cfg)
    layer = e.layer_fn(cfg, policy)
    one = {k: v[0] for k, v in params.items()}
    return saved_residuals(layer, x, one).excluding_arguments()


@pytest.fixture(scope="module")
def depth():
    return e.depth_sweep(TINY, layers=(2, 4), policies=(e.NO_REMAT, "nothing_saveable"))


def test_aliases_have_one_computed_source():
    assert e.ALIASES is policies.ALIASES
    for alias, same in e.ALIASES.items():
        assert getattr(P, alias) is getattr(P, same)


def test_every_policy_of_the_installed_jax_is_measured_or_an_alias():
    measured = {label.split("(")[0] for label in e.POLICIES}
    for name in (n for n in dir(P) if not n.startswith("_")):
        if isinstance(getattr(P, name), type):
            continue  # the classes behind the factories, exported since jax 0.11: no new policy
        if name in e.ALIASES:
            assert getattr(P, name) is getattr(P, e.ALIASES[name])
        else:
            assert name in measured, f"jax.checkpoint_policies.{name} is not measured"


def test_no_remat_keeps_most_and_nothing_saveable_least(results):
    kept = {name: _kept_per_layer(TINY, policy).nbytes for name, policy in e.POLICIES.items()}
    # measure() reports the same figure.
    for name, r in results.items():
        assert r.residual_bytes_per_layer == kept[name]
    assert kept[e.NO_REMAT] == max(kept.values())
    assert kept["nothing_saveable"] == min(kept.values()) == 0
    # The attention einsums have batch dimensions: only dots_saveable keeps them.
    assert kept["dots_saveable"] > kept["dots_with_no_batch_dims_saveable"] > 0
    both = kept["save_from_both_policies(no-batch dots, mlp_hidden)"]
    assert (
        both == kept["dots_with_no_batch_dims_saveable"] + kept["save_only_these_names(mlp_hidden)"]
    )


def test_full_remat_costs_flops_and_saves_memory(results):
    plain, full = results[e.NO_REMAT], results["nothing_saveable"]
    assert full.flops > plain.flops
    assert full.temp_bytes < plain.temp_bytes


def test_dots_policies_differ_exactly_by_the_batched_attention_products():
    cfg = Config(layers=1, batch=2, seq=8, width=24, heads=2)  # seq differs from head_dim
    params, x = init_params(cfg), init_inputs(cfg)
    one = {k: v[0] for k, v in params.items()}

    def kept(policy):
        return saved_residuals(e.layer_fn(cfg, policy), x, one).excluding_arguments()

    dots, no_batch = kept(P.dots_saveable), kept(P.dots_with_no_batch_dims_saveable)
    extra = [r for r in dots if r not in no_batch]
    assert all(r in dots for r in no_batch)
    assert all(r.primitive == "dot_general" for r in extra)
    # The two attention einsums: dot_general puts their batch dimensions (batch, heads) first.
    # q·kᵀ is (b, h, q, k); weights·v holds b·q·width values, in whichever order of (q, head_dim)
    # einsum picked.
    b, s, h = cfg.batch, cfg.seq, cfg.heads
    assert sorted(r.shape[:2] for r in extra) == [(b, h), (b, h)]
    assert sorted(r.nbytes // 4 for r in extra) == sorted([b * h * s * s, b * s * cfg.width])


def test_save_only_these_names_keeps_exactly_the_named_value():
    params, x = init_params(TINY), init_inputs(TINY)
    layer = e.layer_fn(TINY, e.POLICIES["save_only_these_names(mlp_hidden)"])
    kept = saved_residuals(layer, x, {k: v[0] for k, v in params.items()}).excluding_arguments()
    assert [r.name for r in kept] == ["mlp_hidden"]
    assert kept[0].shape == (TINY.batch, TINY.seq, TINY.mlp_ratio * TINY.width)


def test_loss_matches_float64_and_gradients_agree_across_policies():
    params, x = init_params(TINY), init_inputs(TINY)
    with jax.default_matmul_precision("highest"):
        value = e.make_loss(TINY, None)(params, x)
        np.testing.assert_allclose(value, e.loss_float64(TINY, params, x), rtol=1e-5)
        reference = jax.grad(e.make_loss(TINY, None))(params, x)
        # One compiled program per policy: putting every policy in one program made XLA:GPU
        # fail with an internal layout error around the offloaded loop carries (jax 0.11.2).
        every = {
            n: jax.jit(jax.grad(e.make_loss(TINY, pol)))(params, x) for n, pol in e.POLICIES.items()
        }
        for name, grads in every.items():
            for key in reference:
                np.testing.assert_allclose(
                    grads[key], reference[key], rtol=1e-4, atol=1e-6, err_msg=name
                )
    # The gradient against NumPy float64: a central difference of loss_float64 along a random
    # direction equals the directional derivative <grad, direction>.
    rng = np.random.default_rng(0)
    direction = {k: rng.standard_normal(v.shape) for k, v in params.items()}
    base = {k: np.asarray(v, np.float64) for k, v in params.items()}
    eps = 1e-5
    shifted = [
        e.loss_float64(TINY, {k: base[k] + sign * eps * direction[k] for k in base}, x)
        for sign in (1, -1)
    ]
    numeric = (shifted[0] - shifted[1]) / (2 * eps)
    analytic = sum(float(np.sum(np.asarray(reference[k], np.float64) * direction[k])) for k in base)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-3)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's FLOP counting convention")
def test_cost_analysis_agrees_with_counting_products_on_cpu():
    """XLA:CPU counts a scan's body once, and full remat recomputes all but the last product."""
    cfg = Config(layers=3, batch=2, seq=64, width=64, heads=2)
    got = {r.policy: r.flops for r in e.measure(cfg, [e.NO_REMAT, "nothing_saveable"], 1, False)}
    forward = sum(e.layer_flops(cfg).values())
    np.testing.assert_allclose(got[e.NO_REMAT], 3 * forward, rtol=0.1)
    textbook, refined = e.full_remat_flop_ratio(cfg)
    assert textbook == pytest.approx(4 / 3)
    assert refined < textbook
    assert got["nothing_saveable"] / got[e.NO_REMAT] == pytest.approx(refined, rel=0.03)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="XLA:CPU's FLOP counting convention")
def test_page_size_counts_one_layer_and_full_remat_costs_less_than_four_thirds():
    """The page's theory section, on the page's own size (small)."""
    cfg = SIZES["small"]
    got = e.measure(cfg, [e.NO_REMAT, "nothing_saveable"], time_steps=False)
    share = e.counted_share(cfg, got)
    assert 1.0 <= share.of_one_layer < 1.1  # elementwise work: small next to the products
    assert share.of_all_layers == pytest.approx(share.of_one_layer / cfg.layers)
    assert e.flop_ratio(got) < 4 / 3


def test_depth_sweep_grows_without_remat_and_stays_flat_with_it(depth):
    temp = {(p.policy, p.layers): p.temp_bytes for p in depth}
    plain_growth = temp[(e.NO_REMAT, 4)] - temp[(e.NO_REMAT, 2)]
    remat_growth = temp[("nothing_saveable", 4)] - temp[("nothing_saveable", 2)]
    assert plain_growth > 0
    assert remat_growth < plain_growth


def test_json_round_trip(tmp_path, results, depth):
    run = e.Run(collect().as_dict(), TINY, list(results.values()), depth)
    path = tmp_path / "run.json"
    e.save(run, path)
    assert e.load(path) == run
    assert e.load_all(tmp_path) == [run]
    assert run.runinfo["device"] in run.label()
    assert run.runinfo["jax"] in run.label()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="other/1"), "schema is 'other/1', expected one of"),
        (lambda d: d.pop("schema"), "schema is None"),
        (lambda d: d.pop("results"), "'results' must be a list"),
        (lambda d: d["results"][0].pop("temp_bytes"), "results[0]: missing temp_bytes"),
        (lambda d: d["runinfo"].pop("device"), "runinfo lacks 'device'"),
        (lambda d: d["config"].update(heads=3), "not divisible"),
    ],
)
def test_malformed_files_are_rejected_clearly(tmp_path, results, mutate, message):
    data = e.Run(collect().as_dict(), TINY, list(results.values()), []).to_json()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(e.ExplorerDataError, match="bad.json: .*" + _escape(message)):
        e.load(path)


def _escape(text: str) -> str:
    return text.replace("[", r"\[").replace("]", r"\]")


def test_not_json_is_rejected(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(e.ExplorerDataError, match=r"bad\.json: not JSON"):
        e.load(path)


def test_cli_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("keep me")
    assert main(["--size", "tiny", "--out", str(out)]) == 2
    assert out.read_text() == "keep me"
    assert "not overwriting" in capsys.readouterr().err


def test_cli_rejects_unknown_policies(capsys):
    with pytest.raises(SystemExit):
        main(["--size", "tiny", "--policies", "no remat,nope"])
    assert "unknown policies ['nope']" in capsys.readouterr().err


def test_cli_writes_a_loadable_file(tmp_path):
    out = tmp_path / "r.json"
    argv = ["--size", "tiny", "--layers", "3", "--repeats", "7", "--depths", "2"]
    assert main([*argv, "--policies", "no remat,nothing_saveable", "--out", str(out)]) == 0
    run = e.load(out)
    assert run.config == dataclasses.replace(TINY, layers=3)
    assert [r.policy for r in run.results] == [e.NO_REMAT, "nothing_saveable"]
    assert all(r.step_time_s > 0 for r in run.results)
    assert {(p.policy, p.layers) for p in run.depth} == {(e.NO_REMAT, 2), ("nothing_saveable", 2)}
    assert run.runinfo == collect().as_dict()


def _user_loss(w, x):
    return jnp.mean(jnp.tanh(jnp.tanh(x @ w) @ w) ** 2)


def test_compare_policies_on_a_user_function():
    w, x = jnp.ones((16, 16)) / 16, jnp.ones((8, 16))
    table = e.compare_policies(
        _user_loss, w, x, policies=[e.NO_REMAT, "nothing_saveable"], repeats=7
    )
    rows = {r["policy"]: r for r in table.rows}
    # Without remat the backward pass keeps both tanh outputs and the inner product (8×16 each).
    assert rows[e.NO_REMAT]["residual_bytes_per_layer"] >= 2 * 8 * 16 * 4
    assert rows["nothing_saveable"]["residual_bytes_per_layer"] == 0
    assert "| nothing_saveable |" in table._repr_markdown_()
    assert "| nothing_saveable |" in str(table)
    # Timed with a spread: the table shows it, and verdicts can be given.
    assert all(r.timing is not None and r.timing.repeats == 7 for r in table.results)
    assert e.timing_verdicts(table.results) is not None


def _scanned_loss(weights, x, policy=None):
    def layer(h, w):
        return h + jnp.tanh(h @ w), None

    body = layer if policy is None else jax.checkpoint(layer, policy=policy)
    h, _ = jax.lax.scan(body, x, weights)
    return jnp.mean(h**2)


def test_compare_policies_passes_the_policy_to_functions_that_take_one():
    weights, x = jnp.ones((6, 32, 32)) / 32, jnp.ones((64, 32))
    table = e.compare_policies(
        _scanned_loss, weights, x, policies=[e.NO_REMAT, "nothing_saveable"], repeats=7
    )
    rows = {r.policy: r for r in table.results}
    assert rows["nothing_saveable"].temp_bytes < rows[e.NO_REMAT].temp_bytes
    assert rows["nothing_saveable"].flops > rows[e.NO_REMAT].flops


def _loops(x):
    return jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * 2.0), (0, x))[1].sum()


def test_compare_policies_rejects_bad_functions():
    with pytest.raises(TypeError, match="at least one floating-point array"):
        e.compare_policies(lambda n: n * 2.0, 3)
    with pytest.raises(TypeError, match="no arguments"):
        e.compare_policies(lambda: jnp.float32(1.0))
    with pytest.raises(ValueError, match="returns a scalar"):
        e.compare_policies(lambda x: x * 2.0, jnp.ones(3))
    with pytest.raises(TypeError, match="cannot be differentiated"):
        e.compare_policies(lambda x: jnp.sum(x > 0), jnp.ones(3))
    with pytest.raises(ValueError, match=r"jax\.grad cannot differentiate '_loops'"):
        e.compare_policies(_loops, jnp.ones(3))
    with pytest.raises(KeyError, match="unknown policies"):
        e.compare_policies(_user_loss, jnp.ones((2, 2)), jnp.ones((2, 2)), policies=["nope"])


def test_config_rejects_heads_that_do_not_divide_width():
    with pytest.raises(ValueError, match="not divisible"):
        dataclasses.replace(TINY, heads=3)


@pytest.mark.gpu
def test_gpu_memory_ordering_matches_the_cpu_ordering():
    """On a GPU, the compiled memory per policy is ordered as on the CPU."""
    cfg = SIZES["small"]
    names = [e.NO_REMAT, "dots_saveable", "dots_with_no_batch_dims_saveable", "nothing_saveable"]
    temp = {r.policy: r.temp_bytes for r in e.measure(cfg, names, time_steps=False)}
    assert temp[e.NO_REMAT] > temp["dots_saveable"] > temp["nothing_saveable"]
    assert temp["dots_with_no_batch_dims_saveable"] > temp["nothing_saveable"]


@pytest.mark.gpu
def test_offload_moves_bytes_to_the_host_on_gpu():
    cfg = SIZES["small"]
    kept, offloaded = "save_only_these_names(mlp_hidden)", e.OFFLOAD_POLICIES[0]
    got = {r.policy: r for r in e.measure(cfg, [kept, offloaded], time_steps=False)}
    assert got[offloaded].host_temp_bytes > 0
    assert got[offloaded].temp_bytes < got[kept].temp_bytes


# --- schema versions: spreads recorded (2) or not (1) ---------------------------------------------


def _result(policy, median=None, low=None, high=None, temp=1000, flops=100.0):
    timing = None if median is None else Timing(median, low, high, 7)
    return e.Result.with_timing(
        timing,
        policy=policy,
        residual_bytes_per_layer=10,
        temp_bytes=temp,
        argument_bytes=0,
        host_temp_bytes=0,
        flops=flops,
    )


def test_timed_run_round_trips_with_its_spread(tmp_path):
    results = [
        _result(e.NO_REMAT, 0.010, 0.009, 0.012),
        _result("nothing_saveable", 0.02, 0.019, 0.03),
    ]
    run = e.Run(collect().as_dict(), TINY, results, [])
    e.save(run, tmp_path / "run.json")
    back = e.load(tmp_path / "run.json")
    assert back == run
    assert back.schema_version == 2
    assert back.results[0].timing == Timing(0.010, 0.009, 0.012, 7)
    assert json.loads((tmp_path / "run.json").read_text())["schema"] == e.SCHEMA


def test_save_never_overwrites(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("keep me")
    run = e.Run(collect().as_dict(), TINY, [_result(e.NO_REMAT)], [])
    with pytest.raises(FileExistsError, match="not overwriting"):
        e.save(run, path)
    assert path.read_text() == "keep me"


def test_committed_h100_file_loads_as_schema_1_without_spread():
    (run,) = [r for r in e.load_all(DATA) if r.runinfo["backend"] == "gpu"]
    assert run.schema_version == 1
    assert all(r.step_time_s is not None and r.timing is None for r in run.results)
    assert not any(r.spread_recorded for r in run.results)
    # Its step-time cells say so, no ordering is claimed from it, and its plot panel is marked.
    table = e.results_table(run.results, run.config)
    assert all(MEDIAN_ONLY in cell for cell in table.column(table.header[-1]))
    assert e.timing_verdicts(run.results) is None
    assert "cannot tell a difference from noise" in e.ordering_sentence(run.results)
    assert "cannot choose" in e.budget_sentence(run.results, 10**12)
    # A version-1 run written back stays version 1.
    assert run.to_json()["schema"] == "jax-remat-guide/explorer/1"


def test_flops_column_is_marked_where_xla_leaves_out_the_products(results):
    (gpu,) = [r for r in e.load_all(DATA) if r.runinfo["backend"] == "gpu"]
    assert not e.counted_share(gpu.config, gpu.results).counts_products
    assert e.results_table(gpu.results, gpu.config).header[4] == FLOPS_WITHOUT_PRODUCTS
    if jax.default_backend() == "cpu":  # XLA:CPU counts the products (a loop body once)
        assert e.counted_share(TINY, list(results.values())).counts_products
        assert e.results_table(list(results.values()), TINY).header[4] == FLOPS


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("step_time_min_s"), "missing step_time_min_s"),
        (lambda r: r.update(step_time_s=5.0), "not within its recorded range"),
    ],
)
def test_schema_2_requires_a_consistent_spread(tmp_path, mutate, message):
    run = e.Run(collect().as_dict(), TINY, [_result(e.NO_REMAT, 0.01, 0.009, 0.012)], [])
    data = run.to_json()
    mutate(data["results"][0])
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(e.ExplorerDataError, match=message):
        e.load(tmp_path / "bad.json")


def test_schema_1_rejects_spread_fields(tmp_path):
    data = e.Run(collect().as_dict(), TINY, [_result(e.NO_REMAT, 0.01, 0.009, 0.012)], []).to_json()
    data["schema"] = "jax-remat-guide/explorer/1"
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(e.ExplorerDataError, match="belong to schema version 2"):
        e.load(tmp_path / "bad.json")


# --- verdicts: an ordering only where the ranges do not overlap ------------------------------


def test_timing_verdicts_claim_an_order_only_beyond_the_noise():
    results = [
        _result(e.NO_REMAT, 0.010, 0.009, 0.011),
        _result("a", 0.020, 0.015, 0.030),  # slower: 15 ms > 11 ms
        _result("b", 0.005, 0.004, 0.008),  # faster: 8 ms < 9 ms
        _result("c", 0.012, 0.0105, 0.013),  # overlaps
    ]
    assert e.timing_verdicts(results) == {"a": "slower", "b": "faster", "c": "within the noise"}
    sentence = e.ordering_sentence(results)
    assert "faster: `b`" in sentence
    assert "slower: `a`" in sentence
    assert "within the noise: 1 of 3" in sentence


def test_the_gelus_output_as_a_name_costs_memory_and_saves_no_flops():
    """The page: keeping mlp_hidden (the GELU's output) spares no recomputation, because the
    GELU's derivative needs its input, the product, which is then computed again."""
    cfg = SIZES["small"]
    rows = {
        r.policy: r
        for r in e.measure(
            cfg, ["save_only_these_names(mlp_hidden)", "nothing_saveable"], time_steps=False
        )
    }
    hidden, nothing = rows["save_only_these_names(mlp_hidden)"], rows["nothing_saveable"]
    assert hidden.residual_bytes_per_layer > nothing.residual_bytes_per_layer == 0
    assert hidden.temp_bytes > nothing.temp_bytes
    assert hidden.flops == pytest.approx(nothing.flops, rel=0.01)


def test_no_order_is_claimed_when_every_range_overlaps():
    results = [
        _result(e.NO_REMAT, 0.010, 0.008, 0.013),
        _result("a", 0.009, 0.0085, 0.012),
        _result("b", 0.012, 0.009, 0.014),
    ]
    sentence = e.ordering_sentence(results)
    assert "cannot tell their step times apart" in sentence
    assert "faster" not in sentence
    assert "slower" not in sentence


def test_step_times_are_taken_in_interleaved_rounds():
    """Each round calls every function once, in a rotated order, after the warm-up calls."""
    from examples.measure import time_interleaved

    calls = []

    def recorder(name):
        def fn(x):
            calls.append(name)
            return x

        return fn

    fns = {n: recorder(n) for n in ("a", "b", "c")}
    timings = time_interleaved(fns, jnp.ones(2), repeats=7, warmup=1)
    assert calls[:3] == ["a", "b", "c"]  # the warm-up
    rounds = [calls[3 + 3 * i : 6 + 3 * i] for i in range(7)]
    assert rounds[0] == ["a", "b", "c"]
    assert rounds[1] == ["b", "c", "a"]
    assert all(sorted(r) == ["a", "b", "c"] for r in rounds)
    assert all(t.repeats == 7 and t.min_s <= t.median_s <= t.max_s for t in timings.values())


def test_budget_picks_a_policy_only_when_it_is_faster_than_every_other():
    results = [
        _result(e.NO_REMAT, 0.010, 0.009, 0.011, temp=100),
        _result("a", 0.020, 0.019, 0.021, temp=40),
        _result("b", 0.030, 0.029, 0.031, temp=30),
        _result("c", 0.0205, 0.0195, 0.022, temp=50),
    ]
    fits, fastest = e.render.under_budget(results, 45)
    assert [r.policy for r in fits] == ["a", "b"]
    assert fastest.policy == "a"
    assert "`a` is faster than each of the others" in e.budget_sentence(results, 45)
    fits, fastest = e.render.under_budget(results, 60)  # a and c overlap
    assert len(fits) == 3
    assert fastest is None
    assert "not by these step times" in e.budget_sentence(results, 60)
    assert e.budget_sentence(results, 35) == "Only `b` fits in 35 B."
    assert e.budget_sentence(results, 10) == "No measured policy fits in 10 B."


def test_cli_refuses_fewer_than_seven_repeats(capsys):
    with pytest.raises(SystemExit):
        main(["--size", "tiny", "--repeats", "3"])
    assert "at least 7 timed calls" in capsys.readouterr().err


# --- excluding a name (the section of that title on the page) ------------------------------


def test_save_anything_except_these_names_answers_as_this_jax_implements_it():
    """JAX 0.5.0 to 0.9.2 implement the policy as documented (it refuses the `name` equations
    with its names); later releases answer yes to every value. The page glues the installed
    release's answer, so the test reads it in the same run and checks the two agree."""
    listings = e.name_exclusion(SIZES["small"])
    describe = {k: [r.describe() for r in v] for k, v in listings.items()}
    shipped = describe['save_anything_except_these_names("attn_logits")']
    honoured = policies.excluded_names_honoured()  # measured on a value the backward pass reads
    # Either way it keeps what everything_saveable keeps here: the logits are not a residual.
    assert shipped == describe["everything_saveable"]
    assert shipped == describe['excluding_names("attn_logits")']
    # The shipped policy's answer for the `name` equation it was told to exclude, taken from a
    # real jaxpr (JAX 0.5 compares the primitive by identity).
    (eqn,) = jax.make_jaxpr(lambda t: checkpoint_name(t, "attn_logits"))(1.0).eqns
    assert eqn.primitive.name == "name"
    answer = P.save_anything_except_these_names("attn_logits")(eqn.primitive, **eqn.params)
    assert answer is (not honoured)
    assert P.save_anything_except_these_names("attn_logits")(eqn.primitive, name="other") is True


def test_logits_are_not_a_residual_and_an_honoured_exclusion_saves_nothing():
    listings = e.name_exclusion(SIZES["small"])
    everything = listings["everything_saveable"]
    # Softmax, differentiated through its primitives, keeps exp(logits - max), as large as the
    # logits, and its output (div), but never the logits: the page says so.
    assert [r.name for r in everything.of_kind("named")] == ["mlp_hidden"]
    cfg = SIZES["small"]
    logits = f"f32[{cfg.batch},{cfg.heads},{cfg.seq},{cfg.seq}]"
    kept = [(r.primitive, r.type_str) for r in everything]
    assert ("exp", logits) in kept
    assert ("div", logits) in kept
    assert not getattr(jax.config, "jax_softmax_custom_jvp", False)
    honoured_logits = listings['excluding_names("attn_logits")']
    assert [r.describe() for r in honoured_logits] == [r.describe() for r in everything]
    # Refusing "mlp_hidden" keeps the value that feeds checkpoint_name in its place.
    honoured = listings['excluding_names("mlp_hidden")']
    assert not honoured.of_kind("named")
    assert len(honoured) == len(everything)
    assert honoured.nbytes == everything.nbytes
    (named,) = everything.of_kind("named")
    added = collections.Counter(honoured) - collections.Counter(everything)
    assert [(r.primitive, r.shape) for r in added.elements()] == [("mul", named.shape)]
    # The allow-list really drops what it is not told to keep.
    allow = listings['save_any_names_but_these("attn_logits")']
    assert [r.name for r in allow] == ["mlp_hidden"]
    assert allow.nbytes < everything.nbytes / 5


# --- the page's other claims --------------------------------------------------------------------


def test_recursive_checkpointing_costs_about_half_a_forward_pass_per_level():
    from examples.tutorial import recursive_sin_cos_formula

    levels = e.recursive_levels((4, 8, 16, 32, 64))
    added = [lv.added for lv in levels if lv.added is not None]
    assert len(added) == 4
    assert all(0.3 < a < 0.55 for a in added)  # half of one, not one
    assert added == sorted(added)  # approaching the limit 1/2 from below
    for lv in levels:
        assert lv.forward_passes == pytest.approx(recursive_sin_cos_formula(lv.depth) / lv.depth)
    assert [lv.residuals for lv in levels] == [lv.depth.bit_length() for lv in levels]


def test_depth_growth_matches_kept_per_layer_and_the_block_input():
    cfg = SIZES["small"]
    names = [e.NO_REMAT, "nothing_saveable"]
    growth = e.growth_per_layer(e.depth_sweep(cfg, layers=(2, 4), policies=names))
    kept = e.layer_residuals(cfg, None).nbytes
    assert 0.9 < growth[e.NO_REMAT] / kept < 1.1  # "close"
    block_input = cfg.batch * cfg.seq * cfg.width * 4
    assert growth["nothing_saveable"] == pytest.approx(block_input, rel=0.05)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="describes the CPU backend")
def test_offload_policies_compile_like_their_on_device_twins_on_cpu():
    names = [
        *e.OFFLOAD_POLICIES,
        "save_only_these_names(mlp_hidden)",
        "dots_with_no_batch_dims_saveable",
    ]
    temp = {r.policy: r.temp_bytes for r in e.measure(SIZES["small"], names, time_steps=False)}
    assert temp[e.OFFLOAD_POLICIES[0]] == temp["save_only_these_names(mlp_hidden)"]
    assert temp[e.OFFLOAD_POLICIES[1]] == temp["dots_with_no_batch_dims_saveable"]


def test_committed_gpu_run_moves_offloaded_bytes_to_the_host():
    (run,) = [r for r in e.load_all(DATA) if r.runinfo["backend"] == "gpu"]
    rows = {r.policy: r for r in run.results}
    offloaded = rows[e.OFFLOAD_POLICIES[0]]
    assert offloaded.temp_bytes < rows["save_only_these_names(mlp_hidden)"].temp_bytes
    assert offloaded.host_temp_bytes > 0


def test_tradeoff_error_bars_span_fastest_to_slowest_call_in_milliseconds():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.collections import LineCollection

    from examples.explorer.data import Result
    from examples.explorer.render import plot_tradeoff

    timed = Result("nothing_saveable", 1, 2**20, 0, None, 1.0, 0.004, 0.003, 0.0065, 7)
    fig = plot_tradeoff([("run", [timed])])
    (ax, *_) = fig.axes
    segments = [
        seg
        for coll in ax.collections
        if isinstance(coll, LineCollection)
        for seg in coll.get_segments()
    ]
    assert len(segments) == 1
    xs = segments[0][:, 0]
    np.testing.assert_allclose([xs.min(), xs.max()], [3.0, 6.5])  # ms: min and max of the calls
