"""The tests compile with LLVM's optimisation off (noxfile.py's cheap_codegen_env), and plan as
the default does.

What the tests assert comes from XLA's HLO passes (remat, fusion, scheduling, buffer assignment:
``memory_analysis``, ``cost_analysis``, the optimized module) and from the values a program
computes. ``--xla_backend_optimization_level=0`` changes neither of the first: only the machine
code that LLVM makes from the optimized module, which then runs slower and may round differently
in the last bits. Checked here, in one process, with the level given per compile; and that the
pages' own analysis-only compiles (``examples.tools.measure.compiled_stats``, level 0 wherever it
runs) read the figures of the default level's executable.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_compilation_cache import program

from examples.tools import compat, measure

POLICIES = {
    "no remat": None,
    "nothing_saveable": jax.checkpoint_policies.nothing_saveable,
    "dots_with_no_batch_dims_saveable": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def loss(policy):
    def layer(h, w):
        return jnp.tanh(h @ w), None

    body = layer if policy is None else jax.checkpoint(layer, policy=policy)

    def f(ws, x):
        h, _ = jax.lax.scan(body, x, ws)
        return jnp.mean(h**2)

    return f


def compiled(policy, level: int):
    ws = jax.random.normal(jax.random.key(0), (4, 64, 64)) / 8
    x = jax.random.normal(jax.random.key(1), (32, 64))
    step = jax.jit(jax.value_and_grad(loss(policy)))
    options = {"xla_backend_optimization_level": level}
    return step.lower(ws, x).compile(compiler_options=options), (ws, x)


def plan(c) -> dict:
    m = c.memory_analysis()
    cost = compat.cost_analysis(c)
    return {
        "temp": m.temp_size_in_bytes,
        "arguments": m.argument_size_in_bytes,
        "outputs": m.output_size_in_bytes,
        "aliases": m.alias_size_in_bytes,
        "flops": cost.get("flops"),
        "bytes accessed": cost.get("bytes accessed"),
    }


@pytest.mark.parametrize("label", POLICIES)
def test_llvm_optimisation_off_plans_the_same_memory_flops_and_program(label):
    cheap, args = compiled(POLICIES[label], 0)
    default, _ = compiled(POLICIES[label], 3)  # XLA's default level
    assert plan(cheap) == plan(default)
    assert program(cheap.as_text()) == program(default.as_text())
    (v0, g0), (v3, g3) = cheap(*args), default(*args)
    np.testing.assert_allclose(v0, v3, rtol=1e-6)
    np.testing.assert_allclose(g0, g3, rtol=1e-5, atol=1e-6 * float(np.abs(g3).max()))


def test_the_policies_still_plan_differently_at_level_0():
    """The comparison above could not pass by ignoring the program: the policies differ."""
    temps = {label: plan(compiled(p, 0)[0])["temp"] for label, p in POLICIES.items()}
    assert temps["nothing_saveable"] < temps["no remat"]


# --- the pages' analysis-only compiles -----------------------------------------------------------


@pytest.mark.parametrize("label", POLICIES)
def test_compiled_stats_reads_the_default_levels_plan(label):
    """examples.tools.measure.compiled_stats compiles for reading only, at LLVM level 0
    (ANALYSIS_OPTIONS), in the site's build as in the tests: its figures are those of the
    executable that the default level makes, which is the one a reader's step runs."""
    ws = jax.random.normal(jax.random.key(0), (4, 64, 64)) / 8
    x = jax.random.normal(jax.random.key(1), (32, 64))
    step = jax.value_and_grad(loss(POLICIES[label]))
    default, _ = compiled(POLICIES[label], 3)
    assert measure.ANALYSIS_OPTIONS == {"xla_backend_optimization_level": 0}
    assert measure.compiled_stats(step, ws, x) == measure.stats_of(default)


def test_compiled_stats_of_a_step_that_runs_next_compiles_it_as_it_runs(monkeypatch):
    """runs=True: no analysis-only compile, so that the run reuses the compile."""
    ws, x = jnp.ones((4, 8, 8)), jnp.ones((2, 8))
    step = jax.value_and_grad(loss(None))

    def refused(lowered):
        raise AssertionError("compiled for analysis only")

    monkeypatch.setattr(measure, "compile_for_analysis", refused)
    assert measure.compiled_stats(step, ws, x, runs=True).temp_bytes >= 0
    with pytest.raises(AssertionError, match="analysis only"):
        measure.compiled_stats(step, ws, x)
