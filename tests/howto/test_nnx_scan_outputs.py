"""examples.howto.nnx_scan_outputs: what the forward loop over layers returns for each model of the
NNX guide, and the table of it."""

from __future__ import annotations

import importlib.metadata
import inspect

import jax
import pytest
from flax import nnx

from examples.howto import nnx_scan_outputs as so
from examples.howto.flax_steps import CONFIG
from examples.howto.nnx_training import Block, ScannedTransformer, SplitScannedTransformer

if "graph_updates" not in inspect.signature(nnx.remat).parameters:
    # As tests/howto/test_nnx_training.py: Flax releases before nnx.remat(graph_updates=...)
    # (flax 0.10 with jax 0.5) have none of the models the page compares.
    pytest.skip(
        f"flax {importlib.metadata.version('flax')} lacks nnx.remat(graph_updates=...), "
        "the guide's subject",
        allow_module_level=True,
    )

STATE_AXES = (nnx.Carry, nnx.StateAxes({nnx.Param: 0, nnx.RngState: 0}))


def remat(**kwargs):
    return nnx.remat(Block.__call__, prevent_cse=False, **kwargs)


def page_model(kind):
    """The scanned models of the page (as in tests/howto/test_nnx_training.py)."""

    def rngs():
        return nnx.Rngs(0)

    return {
        "scan": lambda: ScannedTransformer(rngs=rngs()),
        "scan graph": lambda: ScannedTransformer(body=remat(), rngs=rngs()),
        "scan tree": lambda: ScannedTransformer(body=remat(graph_updates=False), rngs=rngs()),
        "scan axes": lambda: ScannedTransformer(
            body=remat(graph_updates=False), in_axes=STATE_AXES, rngs=rngs()
        ),
        "split": lambda: SplitScannedTransformer(rngs=rngs()),
        "split whole": lambda: SplitScannedTransformer(returns=..., rngs=rngs()),
    }[kind]


def test_what_each_scanned_body_returns():
    layers, blocks = CONFIG.layers, ScannedTransformer(rngs=nnx.Rngs(0)).blocks
    weights = sum(a.nbytes for a in jax.tree.leaves(nnx.state(blocks, nnx.Param)))
    out = {kind: so.scan_outputs(page_model(kind)) for kind in (
        "scan", "scan graph", "scan tree", "scan axes", "split", "split whole")}  # fmt: skip
    assert out["scan graph"].parameter_bytes == weights  # every weight, stacked, again
    assert out["split whole"].parameter_bytes == weights
    for kind in ("scan", "scan tree", "scan axes", "split"):
        assert out[kind].parameter_bytes == 0
    assert (
        out["scan tree"].outputs
        == out["scan axes"].outputs
        == [
            f"u32[{layers}]",
            f"f32[{layers},{CONFIG.batch},{CONFIG.seq},{CONFIG.width}]",
        ]
    )
    assert f"u32[{layers}]" in out["scan"].outputs  # the counters leave the plain loop too
    # returns=nnx.RngState: the counters, which change, and the keys, which do not (the
    # docstring of SplitScannedTransformer, shown on the page); nnx.RngCount, the counters alone
    counts = so.scan_outputs(
        lambda: SplitScannedTransformer(returns=nnx.RngCount, rngs=nnx.Rngs(0))
    )
    assert f"u32[{layers}]" in counts.outputs
    assert [o for o in out["split"].outputs if o not in counts.outputs] == [f"key<fry>[{layers}]"]
    assert len(out["scan"].outputs) > 10  # with the activations for the backward loop
    table = so.outputs_table(out, listed=10)
    assert table.column("stacked outputs of the forward scan")[0].endswith("arrays (not listed)")
