"""compile_plan, plan and largest_batch: checked on the CPU target against JAX's own analyses,
and (marked ``plans``) on the TPU compiler's out-of-memory refusal."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from tools._plan_steps import W, make_step

from examples.tools import compat
from examples.tools import plans as plans_module
from examples.tools.plans import NO_REMAT, Plan, Plans, compile_plan, largest_batch, plan
from examples.tools.targets import OutOfMemory, compiler_available, target, xla_log

#: The TPU compiler's refusal, verbatim (libtpu 0.0.50.1; tests/tools/test_targets.py says where).
TPU_OOM = (
    "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total memory "
    "required for HLO temporaries (30.00G) exceeds available HBM (15.75G). HLO module: jit_f.\n"
    "See https://openxla.org/xla/errors/error_1000 for more details."
)


def x_of(batch):
    return jax.ShapeDtypeStruct((batch, 64), jnp.float32)


def jax_own_analyses(fn, *args, **jit_kwargs):
    """JAX's own analyses of ``fn`` compiled for the CPU (the "cpu" target), whatever the default
    backend is: the arguments are placed there first."""
    cpu = jax.devices("cpu")[0]
    on_cpu = jax.sharding.SingleDeviceSharding(cpu)
    args = jax.tree.map(
        lambda a: (
            jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=on_cpu)
            if isinstance(a, jax.ShapeDtypeStruct)
            else jax.device_put(a, cpu)
        ),
        args,
    )
    compiled = jax.jit(fn, **jit_kwargs).lower(*args).compile()
    return compiled.memory_analysis(), compat.cost_analysis(compiled)


def test_the_cpu_plan_is_what_jax_itself_reports():
    step = make_step(NO_REMAT)
    p = compile_plan(step, W, x_of(32), target="cpu", label="no remat")
    memory, cost = jax_own_analyses(step, W, x_of(32))
    assert (p.temp_bytes, p.argument_bytes, p.output_bytes, p.alias_bytes) == (
        memory.temp_size_in_bytes,
        memory.argument_size_in_bytes,
        memory.output_size_in_bytes,
        memory.alias_size_in_bytes,
    )
    assert p.generated_code_bytes == memory.generated_code_size_in_bytes
    assert p.total_bytes == (
        memory.argument_size_in_bytes
        + memory.output_size_in_bytes
        + memory.temp_size_in_bytes
        - memory.alias_size_in_bytes
    )
    assert p.flops == pytest.approx(cost["flops"])
    assert p.cost_source == "compiled"
    assert (p.target, p.label, p.device_count, p.error) == ("cpu", "no remat", 1, None)
    assert p.argument_bytes == (3 * 64 * 64 + 32 * 64) * 4  # the arguments' own size
    assert p.fits
    assert p.memory_bytes == target("cpu").memory_bytes


def test_donated_arguments_are_aliased_and_counted_once():
    def update(w, g):
        return w - 0.1 * g

    args = (jax.ShapeDtypeStruct((256, 256), jnp.float32),) * 2
    p = compile_plan(update, *args, target="cpu", donate_argnums=0)
    memory, _ = jax_own_analyses(update, *args, donate_argnums=0)
    assert p.alias_bytes == memory.alias_size_in_bytes
    if p.alias_bytes:  # jax 0.5 reports a cached donated program as aliasing nothing
        assert p.alias_bytes == 256 * 256 * 4
        assert p.total_bytes == p.argument_bytes + p.output_bytes + p.temp_bytes - p.alias_bytes


def test_concrete_arrays_are_accepted_and_not_copied():
    """A deleted jax.Array still has its shape and dtype and no data: compiling for it proves
    that nothing was copied. A NumPy array and a Python float work too."""
    w = jnp.zeros((3, 64, 64), jnp.float32)
    w.delete()
    x = np.zeros((32, 64), np.float32)
    from_arrays = compile_plan(make_step(NO_REMAT), w, x, target="cpu")
    from_shapes = compile_plan(make_step(NO_REMAT), W, x_of(32), target="cpu")
    assert from_arrays.temp_bytes == from_shapes.temp_bytes
    assert from_arrays.argument_bytes == from_shapes.argument_bytes
    scaled = compile_plan(lambda a, s: a * s, x, 2.0, target="cpu")
    assert scaled.argument_bytes == x.nbytes + 4  # the Python float as jax.jit takes it: float32


def test_in_specs_that_do_not_match_the_arguments_say_so():
    with pytest.raises(ValueError, match="in_specs must match the arguments"):
        compile_plan(make_step(NO_REMAT), W, x_of(8), target="cpu", in_specs=(P(), P(), P()))


def test_in_specs_shard_on_the_mesh_axis():
    p = compile_plan(make_step(NO_REMAT), W, x_of(8), target="cpu", in_specs=(None, P("fsdp")))
    assert p.error is None
    with pytest.raises(ValueError, match="mesh_shape"):
        compile_plan(make_step(NO_REMAT), W, x_of(8), target="cpu", mesh_axes=("data", "fsdp"))


def test_a_compiler_out_of_memory_becomes_a_plan_and_other_errors_propagate(monkeypatch):
    """The TPU compiler's message (verbatim, tests/tools/test_targets.py) raised by compile():
    the plan keeps it and does not fit; any other compile error reaches the caller."""

    def refuse(message):
        def compile(self, *args, **kwargs):
            raise RuntimeError(message)  # jax.errors.JaxRuntimeError, a RuntimeError, on new JAX

        return compile

    monkeypatch.setattr(jax.stages.Lowered, "compile", refuse(TPU_OOM))
    p = compile_plan(make_step(NO_REMAT), W, x_of(8), target="cpu", label="no remat")
    assert p.error == OutOfMemory.parse(TPU_OOM)
    assert not p.fits
    assert p.temp_bytes is None
    assert p.total_bytes is None
    assert "out of memory" in plans_module.Plans([p]).table().column("fits?")[0]
    monkeypatch.setattr(jax.stages.Lowered, "compile", refuse("INTERNAL: something broke"))
    with pytest.raises(RuntimeError, match="something broke"):
        compile_plan(make_step(NO_REMAT), W, x_of(8), target="cpu")


def test_plan_gives_one_row_per_target_and_policy_and_round_trips_as_json():
    policies = {"no remat": NO_REMAT, "nothing_saveable": jax.checkpoint_policies.nothing_saveable}
    plans = plan(make_step, W, x_of(32), targets=["cpu"], policies=policies)
    table = plans.table()
    assert table.column("policy") == ["no remat", "nothing_saveable"]
    assert table.column("target") == ["cpu", "cpu"]
    assert {"total", "compiler's peak", "budget"} <= set(table.header)
    assert (
        plans.get("cpu", "nothing_saveable").temp_bytes <= plans.get("cpu", "no remat").temp_bytes
    )
    assert plans.get("cpu", "nothing_saveable").flops > plans.get("cpu", "no remat").flops
    again = Plans.from_dict(plans.as_dict())
    assert again.plans == plans.plans
    assert plans._repr_markdown_().startswith("Plans, per device")
    assert "| target | policy |" in plans._repr_markdown_()
    with pytest.raises(KeyError, match="no plan"):
        plans.get("cpu", "dots_saveable")


def test_a_plan_with_an_error_round_trips():
    p = Plan.from_dict(
        {
            **compile_plan(make_step(NO_REMAT), W, x_of(8), target="cpu").as_dict(),
            "error": {"message": TPU_OOM, "required_bytes": 1, "available_bytes": 0},
        }
    )
    assert Plan.from_dict(p.as_dict()) == p
    assert not p.fits


def independent_total(batch, policy):
    """arguments + outputs + temporaries - aliased from JAX's own memory_analysis()."""
    memory, _ = jax_own_analyses(make_step(policy), W, x_of(batch))
    return (
        memory.argument_size_in_bytes
        + memory.output_size_in_bytes
        + memory.temp_size_in_bytes
        - memory.alias_size_in_bytes
    )


def test_largest_batch_fits_and_one_step_more_does_not():
    """A memory limit passed in stands for a device's: the answer fits it and the next batch up
    does not, by JAX's own figures; every compile is kept."""
    limit = independent_total(200, NO_REMAT)  # batch 200 fits exactly
    found = largest_batch(
        x_args := (lambda b: (W, x_of(b))), make_step, NO_REMAT, "cpu", lo=8, hi=512,
        multiple_of=8, memory_bytes=limit,
    )  # fmt: skip
    assert found.batch is not None
    assert found.fail_batch == found.batch + 8
    assert found.fit is not None
    assert found.fit.fits
    assert found.fail is not None
    assert not found.fail.fits
    assert independent_total(found.batch, NO_REMAT) <= limit
    assert independent_total(found.fail_batch, NO_REMAT) > limit
    assert found.batch >= 200
    assert found.tried[found.batch] is found.fit
    assert found.tried[found.fail_batch] is found.fail
    assert len(found.tried) <= 2 + 6  # lo, hi and a bisection over 64 multiples of 8
    assert x_args(8)[1].shape == (8, 64)


def test_largest_batch_at_the_ends_of_its_range():
    small = largest_batch(lambda b: (W, x_of(b)), make_step, NO_REMAT, "cpu", lo=8, hi=64,
                          memory_bytes=1)  # fmt: skip
    assert (small.batch, small.fit, small.fail_batch) == (None, None, 8)
    assert small.fail is not None
    assert not small.fail.fits
    big = largest_batch(lambda b: (W, x_of(b)), make_step, NO_REMAT, "cpu", lo=8, hi=64)
    assert (big.batch, big.fail) == (64, None)
    with pytest.raises(ValueError, match="multiples of 8"):
        largest_batch(lambda b: (W, x_of(b)), make_step, NO_REMAT, "cpu", lo=8, hi=60,
                      multiple_of=8)  # fmt: skip


@pytest.mark.plans
def test_the_tpu_compiler_refuses_a_plan_over_its_hbm():
    """One v5e chip: 12 GiB in, 12 GiB out and the temporaries do not fit in its HBM."""
    if not compiler_available("tpu-v5e:1x1"):
        pytest.skip('needs libtpu: pip install "jax[tpu]"')

    def f(x, w):
        return jnp.tanh(x @ w) @ w.T

    args = (jax.ShapeDtypeStruct((3 * 2**20, 1024), jnp.float32),
            jax.ShapeDtypeStruct((1024, 1024), jnp.float32))  # fmt: skip
    p = compile_plan(f, *args, target="tpu-v5e:1x1")
    assert p.error is not None
    assert not p.fits
    assert "CompileTimeHbmOom" in p.error.message
    assert p.error.required_bytes > p.error.available_bytes
    assert p.error.available_bytes <= target("tpu-v5e:1x1").memory_bytes


# --- budgets, XLA's options and log, and the FLOPs of a full step --------------------------------


def a_plan(platform, total_parts, peak, budget):
    temps, arguments = total_parts
    return Plan(target="x", label="l", device_kind="k", device_count=1, memory_bytes=100,
                temp_bytes=temps, argument_bytes=arguments, output_bytes=0, alias_bytes=0,
                generated_code_bytes=0, host_temp_bytes=0, peak_bytes=peak, flops=None,
                bytes_accessed=None, cost_source=None, collectives={}, compile_seconds=0.0,
                budget_bytes=budget, platform=platform)  # fmt: skip


def test_a_tpu_plan_is_judged_by_the_compilers_peak_and_others_by_their_total():
    """The TPU compiler returns plans whose total is over the chip's memory while its own peak
    is within what it can use: the peak is what it judges, so the plan fits there."""
    tpu, gpu = a_plan("tpu", (60, 30), 80, 90), a_plan("cuda", (60, 30), 80, 89)
    assert tpu.total_bytes == 90
    assert tpu.judged_bytes == 80
    assert tpu.fits
    assert gpu.judged_bytes == 90
    assert not gpu.fits


def test_the_budget_is_the_targets_own_limit_unless_the_caller_gives_one():
    x = x_of(32)
    default = compile_plan(make_step(NO_REMAT), W, x, target="cpu")
    assert default.budget_bytes == target("cpu").budget_bytes
    share = compile_plan(make_step(NO_REMAT), W, x, target="cpu", budget=0.5)
    assert share.budget_bytes == int(target("cpu").memory_bytes * 0.5)
    tight = compile_plan(make_step(NO_REMAT), W, x, target="cpu", budget=default.total_bytes - 1)
    assert not tight.fits
    assert tight.error is None
    exact = compile_plan(make_step(NO_REMAT), W, x, target="cpu", budget=default.total_bytes)
    assert exact.fits
    assert Plan.from_dict(tight.as_dict()) == tight


def test_the_gpu_budget_is_the_compilers_base_limit():
    # XLA's GPU compiler logs "exceeds the base limit (67982747238)" for an H100's memory
    assert target("h100-80gb x8").budget_bytes == 67_982_747_238
    assert target("tpu-v5e:2x2").budget_bytes == round(15.75 * 1024**3)


def test_compiler_options_reach_xla_and_are_recorded():
    off = {"xla_disable_hlo_passes": "rematerialization"}
    try:
        p = compile_plan(make_step(NO_REMAT), W, x_of(32), target="cpu", compiler_options=off)
    except RuntimeError as error:  # jax 0.5.0: "Field is repeated; the method requires a singular"
        if "repeated" not in str(error):
            raise
        pytest.skip(f"jax {jax.__version__} cannot set a repeated XLA option in compiler_options")
    assert p.compiler_options == off
    assert p.xla_remat_off
    with pytest.raises(Exception):  # noqa: B017, PT011 (jax 0.5 words it as a protobuf error)
        compile_plan(make_step(NO_REMAT), W, x_of(32), target="cpu",
                     compiler_options={"no_such_option": "1"})  # fmt: skip


def test_xla_log_lines_are_captured_and_still_written(capfd):
    import os

    lines: list[str] = []
    with xla_log(lines):
        os.write(2, b"W1204 22:00:00.000000   1 hlo_rematerialization.cc:3402] Can't reduce\n")
        os.write(2, b"not a log line\n")
    assert lines == ["W1204 22:00:00.000000   1 hlo_rematerialization.cc:3402] Can't reduce"]
    assert "Can't reduce" in capfd.readouterr().err


def test_an_unknown_target_names_the_known_ones_and_the_aliases():
    from examples.tools.targets import UnknownTarget

    with pytest.raises(
        UnknownTarget, match=r"'h100-80gb x8'.*also accepted: 'tpu-v5e' \(tpu-v5e:1x1\)"
    ):
        compile_plan(make_step(NO_REMAT), W, x_of(32), target="h100")
