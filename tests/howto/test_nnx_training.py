"""examples.howto.nnx_training: every claim of the NNX how-to guide, on the installed Flax.

Gradients of each checkpointed model are checked against the same model without a checkpoint
(float64, dropout on) and against float64 from float32; what each step's compiled memory does
is checked in its direction (what each scanned body returns: test_nnx_scan_outputs.py).
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from examples.howto import nnx_training as nx
from examples.howto.flax_steps import LOSS_RTOL, make_batch
from examples.howto.nnx_training import (
    Block,
    ScannedTransformer,
    SplitScannedTransformer,
    Transformer,
    train_step,
)
from examples.tools import compat
from examples.tools.measure import Timing
from examples.tools.models import SIZES

if "graph_updates" not in inspect.signature(nnx.remat).parameters:
    # The guide is about the choice graph_updates makes (and reads leaves with [...]); Flax
    # releases before it (flax 0.10 with jax 0.5) have neither, so nothing here applies to them.
    pytest.skip(
        f"flax {importlib.metadata.version('flax')} lacks nnx.remat(graph_updates=...), "
        "the guide's subject",
        allow_module_level=True,
    )

TINY = SIZES["tiny"]
STATE_AXES = (nnx.Carry, nnx.StateAxes({nnx.Param: 0, nnx.RngState: 0}))


def remat(**kwargs):
    return nnx.remat(Block.__call__, prevent_cse=False, **kwargs)


#: name -> (model class and keyword arguments of the plain model, of the checkpointed one)
FAMILIES = {
    "loop, nnx.remat per block": (Transformer, {}, {"block_call": nnx.remat(Block.__call__)}),
    "loop, a policy": (
        Transformer,
        {},
        {"block_call": nnx.remat(Block.__call__, policy=jax.checkpoint_policies.dots_saveable)},
    ),
    "scan, graph mode": (ScannedTransformer, {}, {"body": remat()}),
    "scan, graph_updates=False": (ScannedTransformer, {}, {"body": remat(graph_updates=False)}),
    "scan, StateAxes": (
        ScannedTransformer,
        {},
        {"body": remat(graph_updates=False), "in_axes": STATE_AXES},
    ),
    "split, returns RngState": (ScannedTransformer, {}, {"cls": SplitScannedTransformer}),
    "split, returns everything": (
        ScannedTransformer,
        {},
        {"cls": SplitScannedTransformer, "returns": ...},
    ),
}


def build(cls, kwargs, dtype=jnp.float32, seed=0):
    kwargs = dict(kwargs)
    cls = kwargs.pop("cls", cls)
    return cls(TINY, dtype=dtype, rngs=nnx.Rngs(seed), **kwargs)


def grads(model, batch):
    """The parameter gradient of one training loss (advances the dropout counters once).

    Compiled, as a training step is: one program per model, where eager execution would compile
    every primitive of the forward and backward passes on its own.
    """
    return nnx.jit(nnx.grad(nx.loss_fn))(model, batch)


def with_params(model, params, dtype):
    nnx.update(model, jax.tree.map(lambda p: p.astype(dtype), params))
    return model


#: The family the quick run checks; `--all` (CI) checks every one (each compiles four programs).
QUICK_FAMILY = "scan, graph_updates=False"


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=() if n == QUICK_FAMILY else pytest.mark.slow) for n in FAMILIES],
)
def test_checkpointed_gradients_equal_plain_gradients(name):
    cls, plain_kwargs, remat_kwargs = FAMILIES[name]
    batch = make_batch(TINY, vocab=nx.VOCAB)
    params = nnx.state(build(cls, plain_kwargs), nnx.Param)  # float32 draws, for every model
    with compat.enable_x64(True):
        plain = grads(
            with_params(build(cls, plain_kwargs, jnp.float64), params, jnp.float64), batch
        )
        model = with_params(build(cls, remat_kwargs, jnp.float64), params, jnp.float64)
        ckpt = grads(model, batch)
        leaves = jax.tree.leaves(plain)
        assert all(leaf.dtype == jnp.float64 for leaf in jax.tree.leaves(ckpt))
        scale = max(float(jnp.max(jnp.abs(leaf))) for leaf in leaves)
        for got, want in zip(jax.tree.leaves(ckpt), leaves, strict=True):
            assert float(jnp.max(jnp.abs(got - want))) <= 1e-12 * scale
        # dropout off: the float64 reference for float32 (float64 mode draws other masks)
        reference = build(cls, plain_kwargs, jnp.float64)
        reference.eval()
        reference = grads(with_params(reference, params, jnp.float64), batch)
    model32 = with_params(build(cls, remat_kwargs), params, jnp.float32)
    model32.eval()
    for got, want in zip(
        jax.tree.leaves(grads(model32, batch)), jax.tree.leaves(reference), strict=True
    ):
        np.testing.assert_allclose(got, np.asarray(want), rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_dropout_is_on_and_counts_one_draw_per_call():
    batch = make_batch(TINY, vocab=nx.VOCAB)
    for kwargs in ({}, {"body": remat()}, {"body": remat(graph_updates=False)}):
        model = build(ScannedTransformer, kwargs)
        loss = nnx.jit(nx.loss_fn)  # as in a step: the streams advance under jit too
        first, second = loss(model, batch), loss(model, batch)
        assert first != second  # the streams advanced: other masks
        optimizer = nx.optimizer_for(model)
        train_step(model, optimizer, batch)
        counts = jax.tree.leaves(nnx.state(model.blocks, nnx.RngCount))[0]
        # two forward calls above and one training step: two dropout calls each
        assert np.asarray(counts).tolist() == [6] * TINY.layers


@pytest.mark.slow
def test_side_by_side_training_gives_identical_losses_and_counters():
    batch = make_batch(TINY, vocab=nx.VOCAB)
    runs = {}
    for name, kwargs in {"plain": {}, "remat": {"body": remat(graph_updates=False)}}.items():
        model = build(ScannedTransformer, kwargs)
        optimizer = nnx.Optimizer(model, optax.adamw(1e-3), wrt=nnx.Param)
        losses = [float(train_step(model, optimizer, batch)) for _ in range(3)]
        runs[name] = (losses, np.asarray(jax.tree.leaves(nnx.state(model.blocks, nnx.RngCount))[0]))
    # The same dropout masks in the recomputation, to float32 rounding (flax_steps.LOSS_RTOL).
    np.testing.assert_allclose(runs["plain"][0], runs["remat"][0], rtol=LOSS_RTOL, atol=0)
    assert runs["plain"][0][2] < runs["plain"][0][0]
    np.testing.assert_array_equal(runs["plain"][1], runs["remat"][1])
    assert runs["plain"][1].tolist() == [6] * TINY.layers


def test_remat_refuses_a_bound_method_and_has_the_documented_arguments():
    block = Block(TINY.width, TINY.heads, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"nnx\.remat does not support bound methods"):
        nnx.remat(block.__call__)
    parameters = inspect.signature(nnx.remat).parameters
    for name in ("prevent_cse", "static_argnums", "policy", "graph", "graph_updates"):
        assert name in parameters


def test_scan_refuses_state_axes_without_graph_updates():
    model = build(ScannedTransformer, {})
    with pytest.raises(ValueError, match="cannot contain `StateAxes`"):
        nnx.scan(lambda x, b: b(x), in_axes=STATE_AXES, out_axes=nnx.Carry, graph_updates=False)(
            jnp.zeros((2, TINY.width)), model.blocks
        )


def test_vmap_with_split_rngs_gives_each_layer_its_own_weights_and_stream():
    model = build(ScannedTransformer, {})
    kernel = np.asarray(model.blocks.qkv.kernel[...])
    assert kernel.shape[0] == TINY.layers
    assert not np.array_equal(kernel[0], kernel[1])
    keys = jax.random.key_data(model.blocks.dropout.rngs.key[...])
    assert len({tuple(np.asarray(k).tolist()) for k in keys}) == TINY.layers


# --- what the page measures -------------------------------------------------------------------


def page_model(kind):
    def rngs():
        return nnx.Rngs(0)

    return {
        "loop": lambda: Transformer(rngs=rngs()),
        "loop remat": lambda: Transformer(block_call=nnx.remat(Block.__call__), rngs=rngs()),
        "scan": lambda: ScannedTransformer(rngs=rngs()),
        "scan graph": lambda: ScannedTransformer(body=remat(), rngs=rngs()),
        "scan tree": lambda: ScannedTransformer(body=remat(graph_updates=False), rngs=rngs()),
        "scan graph false": lambda: ScannedTransformer(body=remat(graph=False), rngs=rngs()),
        "scan axes": lambda: ScannedTransformer(
            body=remat(graph_updates=False), in_axes=STATE_AXES, rngs=rngs()
        ),
        "split": lambda: SplitScannedTransformer(rngs=rngs()),
        "split whole": lambda: SplitScannedTransformer(returns=..., rngs=rngs()),
    }[kind]


@pytest.fixture(scope="module")
def measured():
    kinds = ("loop", "loop remat", "scan", "scan graph", "scan tree", "scan graph false", "split",
             "split whole")  # fmt: skip
    return {kind: nx.measure(kind, page_model(kind)) for kind in kinds}


@pytest.mark.slow
def test_compiled_memory_claims(measured):
    m = {kind: r.step for kind, r in measured.items()}
    assert m["loop remat"].flops > m["loop"].flops  # the recomputation is compiled
    assert m["scan graph"].temp_bytes < m["scan"].temp_bytes  # the checkpoint pays in a scan
    assert m["scan tree"].temp_bytes < m["scan graph"].temp_bytes  # ... more without the copy
    assert m["split whole"].temp_bytes > m["split"].temp_bytes  # returning the weights costs
    # graph=False, the older switch, spares the copy as graph_updates=False does (the page's
    # "In short" calls them the same job; the page glues whether the bytes are equal)
    assert m["scan graph false"].temp_bytes < m["scan graph"].temp_bytes
    facts = nx.step_facts(measured["split"], measured["scan tree"], prefix="x")
    assert facts["x_temp_relation"].endswith(("as", "than"))


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(train_step, "lower"), reason="nnx.jit's lower() came with Flax 0.10.7"
)
def test_measure_reads_what_nnx_jit_lower_compile_reads(measured):
    # The page shows train_step.lower(...).compile() on real arrays, then nx.measure's table,
    # built from shapes alone over the split state: the same step. On the JAX and Flax that
    # build the site both compile to the same figures; on jax 0.10.2 with flax 0.12.8,
    # nnx.jit's own wrapper compiles to 5% more temporaries, so the bound is loose there.
    model = page_model("loop remat")()
    compiled = train_step.lower(model, nx.optimizer_for(model), make_batch()).compile()
    cost = compat.cost_analysis(compiled)  # one dict on every release
    step = measured["loop remat"].step
    exact = compat.jax_version() >= (0, 12)
    temp = compiled.memory_analysis().temp_size_in_bytes
    assert temp == step.temp_bytes if exact else temp == pytest.approx(step.temp_bytes, rel=0.1)
    assert cost is not None
    assert cost["flops"] == pytest.approx(step.flops, rel=0 if exact else 0.01)


def test_timing_table_compares_only_where_ranges_do_not_overlap():
    fast, slow = Timing(1.0, 0.9, 1.1, 7), Timing(3.0, 2.9, 3.2, 7)
    close = Timing(1.05, 0.95, 1.2, 7)
    table = nx.timing_table({"a": fast, "b": slow, "c": close})
    assert table.column("against the first") == ["—", "slower", "within the noise"]


@pytest.mark.slow
def test_the_loop_barrier_verdict_follows_this_release(measured):
    # Whether the barrier keeps the recomputation apart in a Python loop is the XLA release's
    # (jax 0.10.2: no; jax 0.12: yes); the page's verdict is computed from the same figures.
    bare = nx.measure(
        "loop remat, no barrier",
        lambda: Transformer(
            block_call=nnx.remat(Block.__call__, prevent_cse=False), rngs=nnx.Rngs(0)
        ),
    )
    plain, remat = measured["loop"], measured["loop remat"]
    verdict = nx.barrier_facts(plain, remat, bare, "loop")["loop_barrier_verdict"]
    if remat.step.temp_bytes < plain.step.temp_bytes:
        assert verdict.startswith(("with the barrier", "the temporaries went down with"))
    else:
        assert "did not go down" in verdict or "only without" in verdict


def test_the_decorator_form_checkpoints_every_call_with_its_policy():
    from examples.howto.nnx_training import CheckpointedBlock
    from examples.tools.jaxprs import traced_remat_sites

    block = CheckpointedBlock(TINY.width, TINY.heads, rngs=nnx.Rngs(0))
    x = jnp.ones((2, 8, TINY.width))
    graphdef, state = nnx.split(block)

    def gradient(state, x):
        return nnx.grad(lambda b: b(x).sum())(nnx.merge(graphdef, state))

    sites = traced_remat_sites(gradient, state, x)
    assert len(sites) == 1
    assert sites[0].policy is jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    # The decorated call computes what the plain block computes (dropout off).
    plain = Block(TINY.width, TINY.heads, rngs=nnx.Rngs(0))
    block.eval()
    plain.eval()
    np.testing.assert_allclose(block(x), plain(x), rtol=1e-6)
    # ... and the model takes the decorated method as its block_call (the page says so).
    tokens = jnp.zeros((2, 8), jnp.int32)
    models = [
        Transformer(TINY, block_call=call, rngs=nnx.Rngs(0))
        for call in (CheckpointedBlock.__call__, Block.__call__)
    ]
    for model in models:
        model.eval()
    np.testing.assert_allclose(models[0](tokens), models[1](tokens), rtol=1e-5, atol=1e-6)


def test_transform_metadata_names_the_stacked_axis():
    specs = nx.stacked_partition_specs(layers=3, width=8)
    assert specs["linear/kernel"] == jax.sharding.PartitionSpec("layers", None, "model")
    assert specs["linear/bias"] == jax.sharding.PartitionSpec()


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def test_the_installed_flax_is_at_least_the_release_the_page_names():
    """This file runs only where nnx.remat has graph_updates (see the skip above): the release
    the page names as the first with it must not be newer than the installed one, and the bound
    method check, older, must be there too."""
    installed = _release(importlib.metadata.version("flax"))
    assert installed >= _release(nx.GRAPH_UPDATES_SINCE)
    assert _release(nx.BOUND_METHOD_CHECK_SINCE) < _release(nx.GRAPH_UPDATES_SINCE)
    assert _release(nx.GRAPH_SINCE) < _release(nx.GRAPH_UPDATES_SINCE)
    assert "graph" in inspect.signature(nnx.remat).parameters
    assert _release(nx.JIT_LOWER_SINCE) <= installed
    assert hasattr(train_step, "lower")
    with pytest.raises(ValueError, match="bound methods"):
        nnx.remat(Block(TINY.width, TINY.heads, rngs=nnx.Rngs(0)).__call__)


def test_a_names_policy_on_nnx_remat_keeps_the_blocks_named_product():
    """The page: a names-based policy goes where the decorator's policy goes, and keeps the named
    product ``attn_out``."""
    from examples.tools.residuals import saved_residuals

    block = Block(TINY.width, TINY.heads, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(block)
    x = jnp.ones((TINY.batch, TINY.seq, TINY.width))
    policy = jax.checkpoint_policies.save_only_these_names("attn_out")
    call = nnx.remat(Block.__call__, policy=policy, graph_updates=False)

    def loss(state, x):
        return call(nnx.merge(graphdef, state), x).sum()

    kept = saved_residuals(loss, state, x).excluding_arguments()
    assert [r.name for r in kept.of_kind("named")] == ["attn_out"]


# --- a flag at call time ----------------------------------------------------------------------


def _flag_inputs():
    stack = nx.stacked_flag_layers(TINY.layers, TINY.width, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.key(1), (TINY.batch, TINY.seq, TINY.width))
    return stack, x


def test_a_keyword_only_flag_is_refused_and_a_positional_static_one_works():
    layer = nx.FlagLayer(TINY.width, rngs=nnx.Rngs(0))
    x = jnp.ones((TINY.batch, TINY.width))
    with pytest.raises(TypeError, match="keyword arguments could not be resolved to positions"):
        nnx.remat(nx.FlagLayer.__call__)(layer, x, train=True)
    with pytest.raises(TypeError, match="keyword arguments could not be resolved to positions"):
        nnx.remat(functools.partial(nx.FlagLayer.__call__, train=True))(layer, x)
    with pytest.raises(jax.errors.TracerBoolConversionError):
        nnx.remat(nx.apply_layer)(layer, x, True)
    off = nnx.remat(nx.apply_layer, static_argnums=(2,))(layer, x, False)
    np.testing.assert_allclose(off, layer(x, train=False), rtol=1e-6)
    assert not hasattr(nnx, "Remat")


def test_under_nnx_scan_a_static_flag_is_traced_and_a_closed_over_one_is_not():
    stack, x = _flag_inputs()

    @nnx.scan(in_axes=(nnx.Carry, 0, None), out_axes=nnx.Carry)
    def forward(x, layer, train):
        return nnx.remat(nx.apply_layer, static_argnums=(2,))(layer, x, train)

    with pytest.raises(jax.errors.TracerBoolConversionError):
        forward(x, stack, True)
    on, off = (nx.scan_flag_layers(stack, x, train) for train in (True, False))
    assert not np.allclose(on, off)  # dropout ran in one and not the other


def test_the_scanned_flag_layers_against_numpy_in_float64():
    """With dropout off, the checkpointed scan computes, and differentiates, the plain stack:
    each layer x + gelu(x W + b), checked against NumPy in float64 and against the same scan
    without the checkpoint."""
    with compat.enable_x64():
        stack, x = _flag_inputs()
        x = x.astype(jnp.float64)
        params = nnx.state(stack, nnx.Param)
        nnx.update(stack, jax.tree.map(lambda a: a.astype(jnp.float64), params))
        kernel = np.asarray(stack.linear.kernel[...])
        bias = np.asarray(stack.linear.bias[...])
        ref = np.asarray(x)
        for w, b in zip(kernel, bias, strict=True):
            h = ref @ w + b
            gelu = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
            ref = ref + gelu
        out = nx.scan_flag_layers(stack, x, False)
        np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-12, atol=1e-12)

        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def plain(x, layer):
            return layer(x, train=False)

        def loss(fn):
            return nnx.grad(lambda s: (fn(s) ** 2).sum())(stack)

        g_remat = loss(lambda s: nx.scan_flag_layers(s, x, False))
        g_plain = loss(lambda s: plain(x, s))
        for a, b in zip(jax.tree.leaves(g_remat), jax.tree.leaves(g_plain), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)
