"""examples.howto.sharding: the sharded step, on one device and on eight.

The test process has one CPU device, and a process cannot change its device count once JAX's
backend has started. So the eight-device checks run `python -m examples.howto.sharding` in a
subprocess started with `XLA_FLAGS=--xla_force_host_platform_device_count=8` (and JAX held to the
CPU), which writes every device's block of every gradient and the guide's measurements; the tests
here compare them with the one-device gradient and check each claim the page makes on them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from examples.howto import fsdp_step as F
from examples.howto import sharding as s
from examples.tools.compat import jax_version
from examples.tools.models import Config, init_inputs, init_params, scan_loss

ROOT = Path(__file__).resolve().parents[2]
GW = f"save_only_these_names('{F.GATHERED}')"
REGATHER = (
    "nothing_saveable",
    "dots_with_no_batch_dims_saveable",
    "save_only_these_names('mlp_hidden')",
)
KEEP = ("no remat", GW)


# --- one device: errors a reader can cause ------------------------------------------------------


def test_the_device_count_cannot_change_once_the_backend_runs():
    count = len(jax.devices())
    if jax_version() < (0, 5, 3):
        # jax 0.5.0 has no check on the option: the update is taken and silently does nothing.
        jax.config.update("jax_num_cpu_devices", count + 7)
        jax.config.update("jax_num_cpu_devices", -1)  # back to the default: the XLA flag's
    else:
        with pytest.raises(RuntimeError, match="should be updated before backends are initialized"):
            jax.config.update("jax_num_cpu_devices", count + 7)
    assert len(jax.devices()) == count


def test_with_sharding_constraint_refuses_explicit_axes():
    if not hasattr(jax.sharding, "AxisType"):
        pytest.skip(f"jax {jax.__version__} lacks jax.sharding.AxisType: every mesh axis is Auto")
    axis_type = jax.sharding.AxisType
    explicit = jax.make_mesh((1, 1), F.AXES, axis_types=(axis_type.Explicit,) * 2)
    pin = lambda x: jax.lax.with_sharding_constraint(x * 2, NamedSharding(explicit, P("data")))
    with pytest.raises(ValueError, match="can only refer to Auto axes of the mesh"):
        jax.jit(pin)(np.zeros((8, 4)))
    assert F.make_mesh((1, 1)).axis_types == (axis_type.Auto,) * 2


def test_the_cli_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("mine")
    assert s.main(["--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "mine"


# --- eight devices, in a subprocess -----------------------------------------------------------


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    out = tmp_path_factory.mktemp("sharded") / "run"
    env = {
        **os.environ,
        # Eight host devices, beside the flags the session gave (noxfile.py's cheap codegen).
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=8",
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT / "src"),
    }
    if jax_version() < (0, 6):
        # jax 0.5.3 hung (ten minutes, no CPU used) running this eight-device program read back
        # from JAX's persistent compilation cache; compiled afresh it runs in seconds.
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "examples.howto.sharding", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    with np.load(out / "gradients.npz") as npz:
        grads = {k: npz[k] for k in npz.files}
    return data, grads


def _steps(data, variant):
    return {r["policy"]: r for r in data["steps"] if r["variant"] == variant}


@pytest.mark.slow
def test_every_device_block_of_the_gradient_matches_one_device(eight):
    data, grads = eight
    assert data["devices"] == 8
    cfg = Config(**data["check_config"])
    reference = jax.grad(scan_loss(s.plain_layer(cfg, None)))(init_params(cfg), init_inputs(cfg))
    reference = {k: np.asarray(v) for k, v in reference.items()}
    for variant in F.VARIANTS:
        for p in range(len(F.POLICIES)):
            for weight, full in reference.items():
                covered = np.zeros(full.shape, bool)
                for device in range(8):
                    block = grads[f"{variant}/{p}/{weight}/{device}"]
                    start = grads[f"{variant}/{p}/{weight}/{device}/start"]
                    # Weights are split four ways: each device holds a quarter of the rows.
                    assert block.shape == (full.shape[0], full.shape[1] // 4, full.shape[2])
                    where = tuple(slice(a, a + n) for a, n in zip(start, block.shape, strict=True))
                    np.testing.assert_allclose(block, full[where], rtol=2e-5, atol=1e-6)
                    covered[where] = True
                assert covered.all(), f"{variant}/{weight}: the blocks miss part of the gradient"


@pytest.mark.slow
def test_memory_and_flops_of_a_sharded_program_are_per_device(eight):
    data, _ = eight
    cfg = Config(**data["config"])
    weights = sum(a.nbytes for a in init_params(cfg).values())
    batch = init_inputs(cfg).nbytes
    one_device = weights // 4 + batch // 8  # a quarter of each weight, an eighth of the batch
    assert data["argument_bytes_device0"] == one_device
    for step in data["steps"]:
        assert step["argument_bytes"] == one_device
        assert abs(step["output_bytes"] - weights // 4) < 1024  # gradients, sharded like weights
    for name, step in _steps(data, "jit").items():
        if name == GW:  # on one device there is nothing gathered to name
            continue
        ratio = data["single_device"][name]["flops"] / step["flops"]
        assert ratio == pytest.approx(8, rel=0.01), name


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(F.VARIANTS))
def test_which_policies_gather_the_weights_again(eight, variant):
    data, _ = eight
    cfg = Config(**data["config"])
    one_layer = sum(a[0].nbytes for a in init_params(cfg).values())
    steps = _steps(data, variant)
    reports = [F.StepReport(**r) for r in steps.values()]
    # Remat changes what the backward pass recomputes, not the gradient's reductions.
    assert len({r.reduced_bytes for r in reports}) == 1
    for name in REGATHER:
        assert steps[name]["gathers_forward"] == 4, name  # the four weights of a layer
        assert steps[name]["gathers_backward"] == 4, name
        assert steps[name]["gathered_bytes"] == 2 * cfg.layers * one_layer
    if variant == "jit" and data["default_partitioner"] == "GSPMD":
        # The GSPMD partitioner (the default before jax 0.7) gathers the weights again in the
        # backward pass of the jit step even where they are saved (no remat, or the policy that
        # names them); the shard_map step, whose gathers are written out, keeps them.
        for name in KEEP:
            assert steps[name]["gathers_backward"] == 4, name
            assert steps[name]["gathered_bytes"] >= 2 * cfg.layers * one_layer
        return
    for name in KEEP:
        assert steps[name]["gathers_forward"] == 4, name
        assert steps[name]["gathers_backward"] == 0, name
        assert steps[name]["gathered_bytes"] == cfg.layers * one_layer
    # Keeping the gathered weights costs the full weights of every layer on every device (and on
    # jax 0.5.3's shard_map step, 6% more temporary memory besides: XLA's buffer assignment of
    # that release).
    kept = s.kept_cost(reports)[GW]
    slack = 1.07 if variant == "shard_map" and jax_version() < (0, 7) else 1.01
    assert cfg.layers * one_layer <= kept <= slack * cfg.layers * one_layer
    assert [r.weights for r in reports].count("gathered again") == len(REGATHER)


@pytest.mark.slow
def test_the_partitioner_decides_whether_kept_gathered_weights_stay_gathered(eight):
    """Keeping the named gathered weights gathers once under Shardy; under GSPMD the jit step
    stores the kept copy sharded and gathers it again (three gathers a layer, not two). shard_map
    and Explicit axes state the layout themselves and keep it under either partitioner."""
    data, _ = eight
    assert data["default_partitioner"] == ("Shardy" if jax_version() >= (0, 7) else "GSPMD")
    cfg = Config(**data["config"])
    one_layer = sum(a[0].nbytes for a in init_params(cfg).values())
    rows = {(r["variant"], r["policy"]): r for r in data["partitioners"]}
    ways = {variant.split(", ")[0] for variant, _ in rows}
    assert ways >= {"jit", "shard_map"}
    for way in ways:
        for partitioner in s.PARTITIONERS:
            nothing = rows[(f"{way}, {partitioner}", "nothing_saveable")]
            kept = rows[(f"{way}, {partitioner}", GW)]
            assert (nothing["gathers_forward"], nothing["gathers_backward"]) == (4, 4)
            assert nothing["gathered_bytes"] == 2 * cfg.layers * one_layer
            if (way, partitioner) == ("jit", "GSPMD"):
                assert kept["gathers_backward"] == 4, kept
                assert kept["gathered_bytes"] > nothing["gathered_bytes"], kept
            else:
                assert (kept["gathers_forward"], kept["gathers_backward"]) == (4, 0), kept
                assert kept["gathered_bytes"] == cfg.layers * one_layer, kept


@pytest.mark.slow
def test_shard_map_compiles_to_the_same_gathers_and_memory(eight):
    data, _ = eight
    jit, mapped = _steps(data, "jit"), _steps(data, "shard_map")
    same = list(F.POLICIES)
    if jax_version() < (0, 7):
        # jax 0.5 and 0.6's partitioner gathers again under jit what the shard_map step keeps (see
        # test_which_policies_gather_the_weights_again): the same only where nothing is kept
        # that a gather could replace.
        # (jax 0.5.3's partitioner also gathers differently under dots_with_no_batch_dims_saveable.)
        same = ["nothing_saveable"]
        for name in F.POLICIES:
            assert jit[name]["gathered_bytes"] >= mapped[name]["gathered_bytes"], name
        assert jit["no remat"]["gathered_bytes"] > mapped["no remat"]["gathered_bytes"]
    for name in same:
        a, b = jit[name], mapped[name]
        keys = ("gathers_forward", "gathers_backward", "gathered_bytes")
        assert [a[k] for k in keys] == [b[k] for k in keys], name
        assert abs(a["temp_bytes"] - b["temp_bytes"]) / a["temp_bytes"] < 1e-3, name


@pytest.mark.slow
def test_pinning_the_saved_carry(eight):
    data, _ = eight
    free, all_eight, two = (F.StepReport(**r) for r in data["activation"])
    # Pinned to the batch over all eight devices: what the compiler chose anyway.
    assert (free.temp_bytes, free.flops) == (all_eight.temp_bytes, all_eight.flops)
    # Pinned to the data axis alone: more memory and more FLOPs per device.
    assert two.temp_bytes > all_eight.temp_bytes
    assert two.flops > all_eight.flops
    # ... but not four times the work: XLA reshards around the pinned carry, with more
    # all-gathers and more bytes gathered per step (the page names both).
    assert two.flops < 4 * all_eight.flops
    gathers = lambda r: r.gathers_forward + r.gathers_backward
    assert gathers(two) > gathers(all_eight)
    assert two.gathered_bytes > all_eight.gathered_bytes


@pytest.mark.slow
def test_keeping_the_gelu_output_spares_no_flops(eight):
    # GELU's derivative reads its input, so keeping its output leaves the product before it to
    # be recomputed: no fewer FLOPs than keeping nothing, and more memory.
    data, _ = eight
    steps = _steps(data, "jit")
    hidden, nothing = steps["save_only_these_names('mlp_hidden')"], steps["nothing_saveable"]
    assert hidden["flops"] >= nothing["flops"]
    assert hidden["temp_bytes"] > nothing["temp_bytes"]
