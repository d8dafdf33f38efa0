"""examples.howto.fused_attention: what a checkpoint policy sees of a fused attention kernel (JAX's
Pallas flash attention, in interpret mode), against the unfused attention's gradient."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.howto import choose_policy as cp
from examples.howto import fused_attention as fa
from examples.tools import compat
from examples.tools.residuals import saved_residuals


def _relative_error(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def test_cudnn_attention_is_a_custom_vjp_like_the_pallas_kernel():
    from jax._src.cudnn import fused_attention_stablehlo

    attention, _ = fa.pallas_attention()
    assert isinstance(fused_attention_stablehlo._dot_product_attention, jax.custom_vjp)
    assert isinstance(attention.mha, jax.custom_vjp)


_DEPRECATION_CHECK = """
import inspect, warnings
warnings.simplefilter("error")  # any other warning at import fails the check
from examples.tools import measure
from examples.howto import fused_attention as fa
module, message = fa.pallas_attention()
print(message is not None, fa.PALLAS_DEPRECATION in inspect.getsource(module))
"""


def test_the_pallas_kernel_deprecation_is_caught_where_the_release_has_one():
    """In a fresh process (the import warns once): the import reports a deprecation exactly where
    the module's own source declares one (jax 0.12 does, pointing to tokamax), and nothing else."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _DEPRECATION_CHECK], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reported, declared = done.stdout.split()
    assert reported == declared


@pytest.mark.slow
def test_fused_kernel_gradient_is_the_same_under_every_policy():
    args = fa.flash_inputs()
    reference = jax.grad(
        lambda q, k, v: jnp.sum(jax.nn.dot_product_attention(q, k, v).astype(jnp.float32)),
        argnums=(0, 1, 2),
    )(*args)
    plain = jax.grad(fa.flash_loss(cp.NO_REMAT), argnums=(0, 1, 2))(*args)
    for ref, got in zip(reference, plain, strict=True):
        assert _relative_error(got, ref) < 0.05
    for _label, (policy, name_output) in fa.FLASH_CASES.items():
        grads = jax.grad(fa.flash_loss(policy, name_output), argnums=(0, 1, 2))(*args)
        for a, b in zip(grads, plain, strict=True):
            np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))


def _primitives_a_policy_sees() -> set[str]:
    seen: set[str] = set()

    def record(prim, *_, **__):
        seen.add(prim.name)
        return False

    jax.grad(fa.flash_loss(record), argnums=(0, 1, 2))(*fa.flash_inputs())
    return seen


def test_policies_cannot_see_inside_the_kernel_but_can_keep_its_outputs():
    # Whether this release shows a policy the fused kernel as one custom_vjp equation.
    seen = _primitives_a_policy_sees()
    one_equation = fa.CUSTOM_VJP_PRIMITIVE in seen
    # The page: one equation on jax 0.6.2 and later, the pallas_call on 0.5.0 and 0.5.3.
    assert one_equation is (compat.jax_version() >= (0, 6)), jax.__version__
    if one_equation:
        assert seen == {fa.CUSTOM_VJP_PRIMITIVE}  # one equation: nothing inside it is visible
    else:
        assert "pallas_call" in seen, seen
    args = fa.flash_inputs()
    kept, runs = {}, {}
    for label, (policy, name_output) in fa.FLASH_CASES.items():
        loss = fa.flash_loss(policy, name_output)
        kept[label] = saved_residuals(loss, *args).excluding_arguments()
        runs[label] = fa.kernel_runs(loss, *args).count("mha_forward")
    b, s, h, _ = fa.FLASH_SHAPE
    shapes = sorted(r.shape for r in kept[cp.NO_REMAT])
    assert shapes == sorted([fa.FLASH_SHAPE, (b, h, s)])  # the output and the log-sum-exp
    for label in ("nothing_saveable", "dots_saveable", 'save_only_these_names("attn_out")'):
        assert len(kept[label]) == 0, label
        assert runs[label] == 2, label
    if one_equation:
        assert sorted(r.shape for r in kept["save_custom_vjp_outputs"]) == shapes
        assert runs[cp.NO_REMAT] == runs["save_custom_vjp_outputs"] == 1
    else:
        # Releases before 0.6 show a policy the kernel's forward pass (its `pallas_call`), not
        # one custom_vjp equation: matching `custom_vjp_call` keeps nothing, and the kernel runs
        # again, as under nothing_saveable.
        assert len(kept["save_custom_vjp_outputs"]) == 0
        assert runs[cp.NO_REMAT] == 1
        assert runs["save_custom_vjp_outputs"] == 2
    table = fa.flash_table()
    assert table.column("forward kernel runs") == [str(runs[label]) for label in fa.FLASH_CASES]
    # The page's second caution: combined with a names policy that names the kernel's output,
    # and a loss whose derivative reads that output, the output is kept twice (once where a
    # policy sees the kernel as one equation; the named copy alone, and two runs, before).
    both = fa.flash_loss(fa.BOTH_FLASH_POLICY, name_output=True, squared=True)
    kept_both = saved_residuals(both, *args).excluding_arguments()
    outputs = [r for r in kept_both if r.shape == fa.FLASH_SHAPE]
    assert len(outputs) == (2 if one_equation else 1)
    assert fa.kernel_runs(both, *args).count("mha_forward") == (1 if one_equation else 2)
