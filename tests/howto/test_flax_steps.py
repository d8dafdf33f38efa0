"""examples.howto.flax_steps: the batch the two Flax guides share, the barrier's verdict, and
whether two runs' losses agree."""

from __future__ import annotations

import numpy as np
import pytest

from examples.howto import flax_steps as fs
from examples.tools.measure import CompiledStats
from examples.tools.models import Config


def test_the_batch_is_next_token_prediction_of_the_configured_shape():
    cfg = Config(layers=1, batch=3, seq=16, width=8, heads=2)
    batch = fs.make_batch(cfg, vocab=7, seed=5)
    tokens, targets = np.asarray(batch["tokens"]), np.asarray(batch["targets"])
    assert tokens.shape == targets.shape == (3, 16)
    assert tokens.min() >= 0
    assert tokens.max() < 7
    # Each target is the next token; the last wraps round to the first.
    np.testing.assert_array_equal(targets[:, :-1], tokens[:, 1:])
    np.testing.assert_array_equal(targets[:, -1], tokens[:, 0])
    np.testing.assert_array_equal(np.asarray(fs.make_batch(cfg, 7, 5)["tokens"]), tokens)
    assert not np.array_equal(np.asarray(fs.make_batch(cfg, 7, 6)["tokens"]), tokens)


def _measured(name, temp_bytes):
    stats = CompiledStats(temp_bytes, 0, 0, None, 1.0, None)
    return fs.Measured(name, stats)


def test_the_barrier_verdict_reads_the_three_steps_temporaries():
    plain = _measured("plain", 2048)
    expected = {  # (remat went down, remat without the barrier went down) -> the verdict's words
        (True, False): "without it they did not",
        (True, True): "with the barrier and without it",
        (False, True): "only without the barrier",
        (False, False): "did not go down, with the barrier or without",
    }
    for (kept_down, bare_down), words in expected.items():
        remat = _measured("remat", 1024 if kept_down else 2048)
        bare = _measured("bare", 1536 if bare_down else 4096)
        facts = fs.barrier_facts(plain, remat, bare, prefix="p")
        assert set(facts) == {"p_barrier_verdict", "p_no_barrier_temp"}
        assert words in facts["p_barrier_verdict"], (kept_down, bare_down)
        assert facts["p_no_barrier_temp"] == ("1.5 KiB" if bare_down else "4.0 KiB")
    with pytest.raises(ValueError, match="three compiled steps"):
        fs.barrier_facts(plain, fs.Measured("uncompiled", None), plain, "p")


def test_the_losses_verdict_tells_rounding_from_another_mask():
    # The measured pair: jax 0.5.0 at LLVM level 0 rounded the two programs one float32 unit in
    # the last place apart; a new dropout mask in step 0 moved the second loss by 3e-3.
    plain = [3.4381566047668457, 3.401735305786133]
    rounded = [3.4381566047668457, 3.4017350673675537]
    other_mask = [3.4381566047668457, 3.4131288528442383]
    assert fs.losses_verdict({"a": plain, "b": list(plain)}) == "identical at every step"
    assert fs.losses_verdict({"a": plain, "b": rounded}).startswith("equal to float32 rounding")
    assert fs.losses_verdict({"a": plain, "b": other_mask}) == "different (see the table)"
    assert fs.losses_verdict({"a": plain, "b": plain[:1]}) == "different (see the table)"


# --- the NNX guide's "Across releases", on every Flax of the matrix ---------------------------
# tests/howto/test_nnx_training.py skips whole on a Flax without nnx.remat(graph_updates=...),
# so the guide's facts about older releases are checked here, where every release runs.


def _flax_release():
    import importlib.metadata

    version = importlib.metadata.version("flax")
    return tuple(int(part) for part in version.split(".")[:3] if part.isdigit())


def test_nnx_remat_refuses_a_keyword_only_argument_on_every_flax():
    import jax.numpy as jnp
    from flax import nnx

    def layer(x, *, train):
        return x * 2 if train else x

    with pytest.raises(TypeError, match="keyword arguments could not be resolved to positions"):
        nnx.remat(layer)(jnp.ones(3), train=True)
    closed = nnx.remat(lambda x: layer(x, train=True))(jnp.ones(3))  # the guide's fix
    np.testing.assert_array_equal(np.asarray(closed), 2 * np.ones(3))


def test_nnx_remat_class_and_switches_by_release():
    import inspect

    from flax import nnx

    from examples.howto import nnx_training as nx

    def release(text):
        return tuple(int(part) for part in text.split("."))

    installed = _flax_release()
    parameters = inspect.signature(nnx.remat).parameters
    assert hasattr(nnx, "Remat") == (installed < release(nx.REMAT_CLASS_REMOVED_IN))
    assert ("graph" in parameters) == (installed >= release(nx.GRAPH_SINCE))
    assert ("graph_updates" in parameters) == (installed >= release(nx.GRAPH_UPDATES_SINCE))


def test_the_nnx_guides_stacked_model_on_flax_0_10_fails_as_the_guide_says():
    """The guide: on Flax 0.10 its stacked constructor leaves the dropout streams unstacked and
    the scan fails with IndexError; from the release with graph_updates (where the guide's own
    tests run) it trains. Releases between are not claimed."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from examples.howto import nnx_training as nx

    installed = _flax_release()
    if (0, 11) <= installed < tuple(int(p) for p in nx.GRAPH_UPDATES_SINCE.split(".")):
        pytest.skip(
            f"the guide claims nothing for flax {installed} (between 0.10 and "
            f"{nx.GRAPH_UPDATES_SINCE})"
        )
    model = nx.SplitScannedTransformer(rngs=nnx.Rngs(0))
    shapes = {jnp.shape(a) for a in jax.tree.leaves(nnx.state(model.blocks, nnx.RngState))}
    tokens = fs.make_batch()["tokens"]
    if installed < (0, 11):
        assert shapes == {()}
        with pytest.raises(IndexError, match="tuple index out of range"):
            model(tokens)
    else:
        assert shapes == {(nx.CONFIG.layers,)}
        assert model(tokens).shape[:2] == tokens.shape
