"""examples.tools.plan_flops: a step's matrix products counted in its jaxpr, every layer once
per layer, against a count by hand; and the compiler's count, which counts a layer once."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from tools._plan_steps import W, make_step

from examples.howto import fit_model as fm
from examples.tools.plan_flops import step_flops
from examples.tools.plans import NO_REMAT, compile_plan

X = jax.ShapeDtypeStruct((32, 64), jnp.float32)


def test_step_flops_counts_each_dot_once_per_layer_and_the_policys_recomputation():
    """Against the count by hand: each layer's forward is one (B, 64) x (64, 64) product; its
    backward two more (for the input and the weight); nothing_saveable recomputes the forward."""
    forward = 2 * 32 * 64 * 64
    layers = W.shape[0]
    none = step_flops(make_step(NO_REMAT), W, X)
    nothing = step_flops(make_step(jax.checkpoint_policies.nothing_saveable),
                                      W, X)  # fmt: skip
    assert none == 3 * forward * layers
    assert nothing == 4 * forward * layers


@pytest.mark.parametrize("label", ["no remat", "nothing_saveable"])
def test_step_flops_scale_with_the_layers_while_the_compilers_count_does_not(label):
    """The decoder compiled at 2 and 4 layers: XLA's cost analysis counts the scanned layer once
    (its FLOPs barely move), step_flops counts it once per layer (the layers' share doubles), and
    without remat it is three times the forward's products, counted by hand."""

    def counts(layers):
        cfg = dataclasses.replace(fm.DEMO, layers=layers)
        step, args = fm.make_step(cfg, fm.POLICIES[label]), fm.abstract_args(cfg, 2)
        compiled = compile_plan(step, *args, target="cpu")
        return step_flops(step, *args), compiled.flops

    (two, xla_two), (four, xla_four) = counts(2), counts(4)
    c = fm.DEMO
    layer = (
        2 * c.seq * c.width * ((c.heads + 2 * c.kv_heads) * c.head_dim)
        + 2 * c.seq * c.heads * c.head_dim * c.width
        + 2 * c.seq * 3 * c.width * c.mlp
        + 2 * 2 * c.seq * c.seq * c.heads * c.head_dim
    )  # one sequence's forward products
    unembed = 2 * c.seq * c.width * c.vocab
    per_layer = (four - two) / 2  # two sequences' work in one more layer
    if label == "no remat":
        assert two == 2 * 3 * (2 * layer + unembed)
        assert per_layer == 2 * 3 * layer
    else:  # the forward recomputed, less what the backward never reads (the last product)
        assert 2 * 3 * layer < per_layer <= 2 * 4 * layer
        assert two - 2 * per_layer == 2 * 3 * unembed  # outside the layers: no recomputation
    assert four / two > 1.5  # the layers dominate this step
    assert abs(xla_four / xla_two - 1) < 0.05  # the compiler's count: the layer once
