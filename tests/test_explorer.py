"""examples.explorer: measurements consistent with each other and with theory; data round-trips."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples import explorer as e

TINY = e.SIZES["tiny"]


@pytest.fixture(scope="module")
def results():
    return {r.policy: r for r in e.measure(TINY, repeats=1)}


def test_no_remat_keeps_most_and_nothing_saveable_least(results):
    kept = {name: r.residual_bytes_per_layer for name, r in results.items()}
    assert kept[e.NO_REMAT] == max(kept.values())
    assert kept["nothing_saveable"] == min(kept.values()) == 0
    assert kept["dots_saveable"] > kept["dots_with_no_batch_dims_saveable"] > 0


def test_full_remat_costs_flops_and_saves_memory(results):
    plain, full = results[e.NO_REMAT], results["nothing_saveable"]
    assert full.flops > plain.flops
    assert full.temp_bytes < plain.temp_bytes


def test_save_only_these_names_keeps_exactly_the_named_value():
    cfg = TINY
    params, x = e.init_params(cfg), e.init_inputs(cfg)
    layer = e.layer_fn(cfg, e.POLICIES["save_only_these_names(mlp_hidden)"])
    listing = e.saved_residuals(layer, x, {k: v[0] for k, v in params.items()})
    kept = listing.excluding_arguments()
    assert [r.name for r in kept] == ["mlp_hidden"]
    assert kept[0].shape == (cfg.batch, cfg.seq, cfg.mlp_ratio * cfg.width)


def test_loss_matches_float64_and_gradients_agree_across_policies():
    cfg = TINY
    params, x = e.init_params(cfg), e.init_inputs(cfg)
    with jax.default_matmul_precision("highest"):
        value = e.make_loss(cfg, None)(params, x)
        np.testing.assert_allclose(value, e.loss_float64(cfg, params, x), rtol=1e-5)
        reference = jax.grad(e.make_loss(cfg, None))(params, x)
        for name, policy in e.POLICIES.items():
            grads = jax.jit(jax.grad(e.make_loss(cfg, policy)))(params, x)
            for key in reference:
                np.testing.assert_allclose(
                    grads[key], reference[key], rtol=1e-4, atol=1e-6, err_msg=name
                )


def test_depth_sweep_grows_without_remat_and_stays_flat_with_it():
    points = e.depth_sweep(TINY, layers=(2, 8))
    temp = {(p.policy, p.layers): p.temp_bytes for p in points}
    plain_growth = temp[(e.NO_REMAT, 8)] - temp[(e.NO_REMAT, 2)]
    remat_growth = temp[("nothing_saveable", 8)] - temp[("nothing_saveable", 2)]
    assert plain_growth > 0
    assert remat_growth < plain_growth


def test_json_round_trip(tmp_path, results):
    run = e.Run(e.collect().as_dict(), TINY, list(results.values()), e.depth_sweep(TINY, (2,)))
    path = tmp_path / "run.json"
    e.save(run, path)
    assert e.load(path) == run
    assert e.load_all(tmp_path) == [run]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="other/1"), "schema is 'other/1'"),
        (lambda d: d.pop("results"), "'results' must be a list"),
        (lambda d: d["results"][0].pop("temp_bytes"), "results[0]: missing temp_bytes"),
        (lambda d: d["runinfo"].pop("device"), "runinfo lacks 'device'"),
        (lambda d: d["config"].update(heads=3), "not divisible"),
    ],
)
def test_malformed_files_are_rejected_clearly(tmp_path, results, mutate, message):
    run = e.Run(e.collect().as_dict(), TINY, list(results.values()), [])
    data = run.to_json()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(e.ExplorerDataError, match=message.replace("[", r"\[").replace("]", r"\]")):
        e.load(path)


def test_not_json_is_rejected(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(e.ExplorerDataError, match=r"bad\.json: not JSON"):
        e.load(path)


def test_cli_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text("keep me")
    assert e.main(["--size", "tiny", "--out", str(out)]) == 2
    assert out.read_text() == "keep me"
    assert "not overwriting" in capsys.readouterr().err


def test_cli_writes_a_loadable_file(tmp_path):
    out = tmp_path / "r.json"
    assert e.main(["--size", "tiny", "--repeats", "1", "--out", str(out)]) == 0
    run = e.load(out)
    assert run.config == TINY
    assert {r.policy for r in run.results} == set(e.POLICIES)


def _user_loss(w, x):
    return jnp.mean(jnp.tanh(jnp.tanh(x @ w) @ w) ** 2)


def test_compare_policies_on_a_user_function():
    w, x = jnp.ones((16, 16)) / 16, jnp.ones((8, 16))
    table = e.compare_policies(
        _user_loss, w, x, policies=[e.NO_REMAT, "nothing_saveable"], repeats=1
    )
    rows = {r["policy"]: r for r in table.rows}
    assert rows[e.NO_REMAT]["residual_bytes_per_layer"] > 0
    assert rows["nothing_saveable"]["residual_bytes_per_layer"] == 0
    assert "| nothing_saveable |" in table._repr_markdown_()


def test_compare_policies_rejects_bad_functions():
    with pytest.raises(TypeError, match="at least one floating-point array"):
        e.compare_policies(lambda n: n * 2.0, 3)
    with pytest.raises(ValueError, match="returns a scalar"):
        e.compare_policies(lambda x: x * 2.0, jnp.ones(3))
    with pytest.raises(TypeError, match="cannot be differentiated"):
        e.compare_policies(lambda x: jnp.sum(x > 0), jnp.ones(3))
    with pytest.raises(KeyError):
        e.compare_policies(_user_loss, jnp.ones((2, 2)), jnp.ones((2, 2)), policies=["nope"])


def test_config_rejects_heads_that_do_not_divide_width():
    with pytest.raises(ValueError, match="not divisible"):
        dataclasses.replace(TINY, heads=3)


@pytest.mark.gpu
def test_gpu_memory_ordering_matches_the_cpu_ordering():
    """On a GPU, the compiled memory per policy is ordered as on the CPU."""
    cfg = e.SIZES["small"]
    names = [e.NO_REMAT, "dots_saveable", "dots_with_no_batch_dims_saveable", "nothing_saveable"]
    temp = {r.policy: r.temp_bytes for r in e.measure(cfg, names, time_steps=False)}
    assert temp[e.NO_REMAT] > temp["dots_saveable"] > temp["nothing_saveable"]
    assert temp["dots_with_no_batch_dims_saveable"] > temp["nothing_saveable"]


def _scanned_loss(weights, x, policy=None):
    def layer(h, w):
        return h + jnp.tanh(h @ w), None

    body = layer if policy is None else jax.checkpoint(layer, policy=policy)
    h, _ = jax.lax.scan(body, x, weights)
    return jnp.mean(h**2)


def test_compare_policies_passes_the_policy_to_functions_that_take_one():
    weights, x = jnp.ones((6, 32, 32)) / 32, jnp.ones((64, 32))
    table = e.compare_policies(
        _scanned_loss, weights, x, policies=[e.NO_REMAT, "nothing_saveable"], repeats=1
    )
    rows = {r.policy: r for r in table.results}
    assert rows["nothing_saveable"].temp_bytes < rows[e.NO_REMAT].temp_bytes
    assert rows["nothing_saveable"].flops > rows[e.NO_REMAT].flops
