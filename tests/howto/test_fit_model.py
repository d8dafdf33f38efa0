"""examples.howto.fit_model: the decoder of "Will it fit?" against NumPy, and its remat policies.

The forward pass of a tiny configuration is checked against a float64 NumPy transformer written
here from the definitions (RMS norm, rotary positions, causal grouped-query attention, SwiGLU,
cross-entropy), the Adam update against NumPy's, and the gradient under each policy against the
gradient without remat.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as Spec

from examples.howto import fit_model as fm

if not hasattr(jax, "set_mesh"):
    pytest.skip(
        f"jax {jax.__version__} has no jax.set_mesh, which the decoder's step uses to constrain "
        "its activations to the mesh",
        allow_module_level=True,
    )

TINY = fm.ModelConfig("tiny", vocab=50, width=16, layers=3, heads=4, kv_heads=2, head_dim=4,
                      mlp=24, seq=8, tied=False, rope_theta=10_000.0)  # fmt: skip
TIED = dataclasses.replace(TINY, name="tied", tied=True)


def tokens(cfg: fm.ModelConfig, batch: int = 2, seed: int = 1) -> tuple[jax.Array, jax.Array]:
    ids = jax.random.randint(jax.random.key(seed), (batch, cfg.seq + 1), 0, cfg.vocab)
    return ids[:, :-1], ids[:, 1:]


# --- an independent reference: the same model in NumPy float64 ----------------------------------


def np_norm(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * scale


def np_rope(x: np.ndarray, theta: float) -> np.ndarray:
    _, s, _, d = x.shape
    half = d // 2
    angle = np.arange(s)[:, None] * theta ** (-np.arange(half) / half)[None, :]
    cos, sin = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
    return np.concatenate([x[..., :half] * cos - x[..., half:] * sin,
                           x[..., half:] * cos + x[..., :half] * sin], -1)  # fmt: skip


def np_loss(params: dict, tok: np.ndarray, tgt: np.ndarray, cfg: fm.ModelConfig) -> float:
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    h = p["embed"][tok]
    _b, s, _ = h.shape
    for i in range(cfg.layers):
        w = {k: v[i] for k, v in p["layers"].items()}
        x = np_norm(h, w["attn_norm"])
        q = np_rope(np.einsum("bsd,dhk->bshk", x, w["wq"]), cfg.rope_theta)
        k = np_rope(np.einsum("bsd,dhk->bshk", x, w["wk"]), cfg.rope_theta)
        v = np.einsum("bsd,dhk->bshk", x, w["wv"])
        # grouped-query attention: query head j reads key/value head j // group
        group = cfg.heads // cfg.kv_heads
        k, v = np.repeat(k, group, axis=2), np.repeat(v, group, axis=2)
        logits = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(cfg.head_dim)
        logits = np.where(np.tril(np.ones((s, s), bool)), logits, -np.inf)
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        h = h + np.einsum("bqhk,hkd->bqd", np.einsum("bhqk,bkhd->bqhd", weights, v), w["wo"])
        x = np_norm(h, w["mlp_norm"])
        gate = x @ w["w_gate"]
        h = h + (gate / (1 + np.exp(-gate)) * (x @ w["w_up"])) @ w["w_down"]
    h = np_norm(h, p["final_norm"])
    logits = h @ (p["embed"].T if cfg.tied else p["unembed"])
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[..., 0]
    picked = np.take_along_axis(logits, np.asarray(tgt)[..., None], -1)[..., 0]
    return float(np.mean(log_z - picked))


@pytest.mark.parametrize("cfg", [TINY, TIED], ids=["untied", "tied"])
def test_loss_matches_numpy_float64(cfg):
    params = fm.init_params(cfg, dtype=jnp.float32)
    tok, tgt = tokens(cfg)
    expected = np_loss(params, np.asarray(tok), np.asarray(tgt), cfg)
    got = fm.loss(params, tok, tgt, cfg, fm.NO_REMAT)
    np.testing.assert_allclose(float(got), expected, rtol=1e-5)


def test_the_mask_is_causal():
    """A later token never changes an earlier position's loss term."""
    params = fm.init_params(TINY, dtype=jnp.float32)
    tok, _ = tokens(TINY, batch=1)
    changed = tok.at[0, -1].set((tok[0, -1] + 1) % TINY.vocab)

    def hidden(t):
        h = params["embed"][t]
        for i in range(TINY.layers):
            h = fm.layer(h, jax.tree.map(lambda w, i=i: w[i], params["layers"]), TINY)
        return h

    np.testing.assert_allclose(hidden(tok)[0, :-1], hidden(changed)[0, :-1], rtol=1e-6)
    assert not np.allclose(hidden(tok)[0, -1], hidden(changed)[0, -1])


@pytest.mark.parametrize(
    "label",
    # nothing_saveable in the quick run, every policy with `--all` (CI)
    [
        pytest.param(k, marks=() if k == "nothing_saveable" else pytest.mark.slow)
        for k in fm.POLICIES
        if k != "no remat"
    ],
)
def test_every_policy_gives_the_gradient_without_remat(label):
    params = fm.init_params(TINY, dtype=jnp.float32)
    tok, tgt = tokens(TINY)
    grad = jax.jit(jax.grad(fm.loss), static_argnums=(3, 4))
    expected = grad(params, tok, tgt, TINY, fm.NO_REMAT)
    got = grad(params, tok, tgt, TINY, fm.POLICIES[label])
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), got, expected)


def test_the_layer_names_its_products_as_maxtext_does():
    params = fm.init_params(TINY, dtype=jnp.float32)
    one = jax.tree.map(lambda w: w[0], params["layers"])
    h = jnp.ones((1, TINY.seq, TINY.width))
    text = str(jax.make_jaxpr(lambda h, p: fm.layer(h, p, TINY))(h, one))
    for name in (*fm.MINIMAL, "context"):
        assert f"name={name}" in text, name


def test_adam_matches_numpy():
    params = fm.init_params(TINY, dtype=jnp.float32)
    grads = jax.tree.map(lambda w: jnp.full_like(w, 0.5), params)
    state = fm.init_state(params)
    new, state = fm.adam(params, grads, state)
    new, state = fm.adam(new, grads, state)
    a = fm.ADAM
    w, m, v = np.asarray(params["final_norm"], np.float64), 0.0, 0.0
    for t in (1, 2):
        m = a["b1"] * m + (1 - a["b1"]) * 0.5
        v = a["b2"] * v + (1 - a["b2"]) * 0.25
        w = w - a["lr"] * (m / (1 - a["b1"] ** t)) / (np.sqrt(v / (1 - a["b2"] ** t)) + a["eps"])
    np.testing.assert_allclose(new["final_norm"], w, rtol=1e-6)
    assert int(state["count"]) == 2
    assert state["m"]["embed"].dtype == jnp.float32


def test_the_step_keeps_bfloat16_parameters_and_lowers_the_loss():
    params = fm.init_params(TINY)
    state = fm.init_state(params)
    tok, tgt = tokens(TINY)
    step = jax.jit(fm.make_step(TINY, fm.POLICIES["nothing_saveable"]))
    losses = []
    for _ in range(5):
        params, state, value = step(params, state, tok, tgt)
        losses.append(float(value))
    assert params["layers"]["wq"].dtype == jnp.bfloat16
    assert losses[-1] < losses[0]


def test_param_count_is_the_sum_of_the_built_shapes():
    for cfg in (TINY, TIED, *fm.CONFIGS.values()):
        shapes = jax.eval_shape(lambda c=cfg: fm.init_params(c))
        assert fm.param_count(cfg) == sum(math.prod(s.shape) for s in jax.tree.leaves(shapes))
    assert 1.2e9 < fm.param_count(fm.CONFIGS["1b"]) < 1.3e9  # Llama 3.2 1B: 1.24B
    assert 8.0e9 < fm.param_count(fm.CONFIGS["8b"]) < 8.1e9  # Llama 3 8B: 8.03B


def test_fsdp_specs_shard_the_width_axis_of_every_weight():
    cfg = fm.CONFIGS["8b"]
    params, opt, tok, _ = fm.abstract_args(cfg, batch=16)
    weights, opt_specs, batch_spec, _ = fm.in_specs(cfg)
    assert batch_spec == Spec("fsdp", None)
    assert opt_specs["m"] == weights
    assert opt_specs["count"] == Spec()

    def check(shape, spec):
        if "fsdp" in spec:
            assert shape.shape[list(spec).index("fsdp")] == cfg.width
        else:
            assert shape.ndim <= 2  # only the norm scales are replicated

    jax.tree.map(check, params, weights, is_leaf=lambda x: isinstance(x, Spec))
    assert opt["m"]["embed"].dtype == jnp.float32
    assert params["embed"].dtype == jnp.bfloat16
    assert tok.shape == (16, cfg.seq)


def test_a_bad_config_is_refused():
    with pytest.raises(ValueError, match=r"heads \(6\) must be a multiple of kv_heads \(4\)"):
        dataclasses.replace(TINY, heads=6, kv_heads=4)
    with pytest.raises(ValueError, match=r"head_dim \(5\) must be even"):
        dataclasses.replace(TINY, head_dim=5)
