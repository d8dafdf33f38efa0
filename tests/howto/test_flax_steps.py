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
