"""examples.tools.residuals against JAX's own print_saved_residuals, line by line."""

from __future__ import annotations

import contextlib
import io
import re
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name, print_saved_residuals

from examples.tools.residuals import format_bytes, relative_source, saved_residuals

PATH = re.compile(r" from \S+?(:\d+(?::\d+)?) \(")


def _g(w, x):
    return jnp.sin(w @ x)


def _chain(w1, w2, w3, x):
    return _g(w3, _g(w2, _g(w1, x)))


def _named(w1, w2, x):
    a = checkpoint_name(_g(w1, x), "a")
    return jnp.sum(checkpoint_name(_g(w2, a), "b") ** 2)


@jax.jit
def _jitted_inner(x):
    return jnp.exp(x) * 2.0


def _with_jit(x):
    return jnp.sum(_jitted_inner(x) ** 2)


def _chain_remat_each(w1, w2, w3, x):
    g = jax.checkpoint(_g)
    return g(w3, g(w2, g(w1, x)))


def _pytree(params, x):
    for w in params["layers"]:
        x = jnp.tanh(w @ x)
    return x.sum()


CHAIN_ARGS = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
CASES = {
    "chain": (_chain, CHAIN_ARGS),
    "chain-remat-each": (_chain_remat_each, CHAIN_ARGS),
    "dots-policy": (
        jax.checkpoint(_chain, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable),
        CHAIN_ARGS,
    ),
    "named": (
        jax.checkpoint(_named, policy=jax.checkpoint_policies.save_only_these_names("a")),
        (jnp.ones((3, 3)), jnp.ones((3, 3)), jnp.ones(3)),
    ),
    "jitted": (_with_jit, (jnp.arange(4.0),)),
    "pytree": (_pytree, ({"layers": [jnp.eye(3), 2 * jnp.eye(3)]}, jnp.ones(3))),
    "bf16": (lambda x: jnp.sum(jnp.sin(x) ** 2), (jnp.ones((2, 8), jnp.bfloat16),)),
}


def _jax_lines(f, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_saved_residuals(f, *args)
    return out.getvalue().splitlines()


#: Older JAX releases word two kinds of residual differently from the newest: a value kept after
#: the ``reduce_precision`` that a checkpoint inserts is "output of reduce_precision", and the input
#: of a ``checkpoint_name`` is "named". examples.tools.residuals words them as the newest releases
#: do.
OLDER_WORDING = re.compile(
    r"^(?P<type>\S+) (output of reduce_precision|named '[^']*') from (?P<at>.*)$"
)
OURS = re.compile(r"^(?P<type>\S+) (output of \S+|named '[^']*') from (?P<at>.*)$")


@pytest.mark.parametrize("case", sorted(CASES))
def test_lines_match_print_saved_residuals_but_for_the_path(case):
    """Line for line what the installed JAX prints, but for the path and the older wording."""
    f, args = CASES[case]
    ours = [
        PATH.sub(r" from PATH\1 (", line) for line in str(saved_residuals(f, *args)).splitlines()
    ]
    theirs = [PATH.sub(r" from PATH\1 (", line) for line in _jax_lines(f, *args)]
    assert len(ours) == len(theirs) > 0
    for mine, jax_line in zip(ours, theirs, strict=True):
        if mine == jax_line:
            continue
        older, translated = OLDER_WORDING.match(jax_line), OURS.match(mine)
        assert older, jax_line
        assert translated, mine
        assert (older["type"], older["at"]) == (translated["type"], translated["at"])
    for line in str(saved_residuals(f, *args)).splitlines():
        assert "/" not in line.split(" from ", 1)[-1].split(":")[0] or "examples/" in line


def test_a_kept_product_is_a_dot_general_on_every_release():
    """The dots policy keeps the three products; JAX itself says so in the newest wording only."""
    f, args = CASES["dots-policy"]
    computed = saved_residuals(f, *args).excluding_arguments()
    assert [(r.primitive, r.shape) for r in computed] == [
        ("dot_general", (5,)),
        ("dot_general", (6,)),
        ("dot_general", (7,)),
    ]
    jax_words = [line.split(" from ")[0].split(" ", 1)[1] for line in _jax_lines(f, *args)[4:]]
    # Either the newest wording, or the older one that named the re-rounding instead.
    assert set(jax_words) <= {"output of dot_general", "output of reduce_precision"}
    assert len(set(jax_words)) == 1


def test_offloaded_residuals_are_marked_on_host_on_every_release():
    policy = jax.checkpoint_policies.offload_dot_with_no_batch_dims("device", "pinned_host")
    f = jax.checkpoint(_chain, policy=policy)
    computed = saved_residuals(f, *CHAIN_ARGS).excluding_arguments()
    assert [(r.primitive, r.on_host) for r in computed] == [("device_put", True)] * 3
    on_device = saved_residuals(CASES["dots-policy"][0], *CHAIN_ARGS).excluding_arguments()
    assert not any(r.on_host for r in on_device)
    # Where the release puts the memory space in the type, it agrees.
    assert all(("<host>" in r.type_str) in (r.on_host, False) for r in computed)


def test_structure_of_the_plain_chain():
    listing = saved_residuals(_chain, *CHAIN_ARGS)
    kinds = [r.kind for r in listing]
    assert kinds == ["argument"] * 4 + ["output"] * 5
    assert [r.argument for r in listing.of_kind("argument")] == ["w1", "w2", "w3", "x"]
    assert [r.primitive for r in listing.of_kind("output")] == ["sin", "cos", "sin", "cos", "cos"]
    assert [r.shape for r in listing.of_kind("output")] == [(5,), (5,), (6,), (6,), (7,)]
    assert all(r.dtype == np.float32 for r in listing)
    # Bytes: every residual is float32; count elements independently of the module.
    elements = sum(int(np.prod(a.shape)) for a in CHAIN_ARGS) + 5 + 5 + 6 + 6 + 7
    assert listing.nbytes == 4 * elements
    assert listing.excluding_arguments().nbytes == 4 * (5 + 5 + 6 + 6 + 7)
    assert all(r.source.startswith("test_residuals.py:") for r in listing.of_kind("output"))
    assert all(r.source.endswith("(_g)") for r in listing.of_kind("output"))


def test_named_values_and_policy():
    f, args = CASES["named"]
    listing = saved_residuals(f, *args)
    named = listing.of_kind("named")
    assert [r.name for r in named] == ["a"]
    assert named[0].shape == (3,)
    assert listing.summary().startswith(f"{len(listing)} residuals")


def test_bfloat16_bytes():
    f, args = CASES["bf16"]
    listing = saved_residuals(f, *args)
    computed = listing.excluding_arguments()
    assert computed, "sin and cos of x must be saved for the backward pass"
    assert all(r.dtype == jnp.bfloat16 and r.nbytes == 16 * 2 for r in computed)


def test_checkpoint_drops_residuals_in_between():
    plain = saved_residuals(_chain, *CHAIN_ARGS).excluding_arguments()
    remat = saved_residuals(jax.checkpoint(_chain), *CHAIN_ARGS).excluding_arguments()
    assert len(remat) == 0 < len(plain)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("/tmp/ipykernel_1130/1801108376.py:6:9 (g)", "<cell>:6:9 (g)"),
        ("/home/someone/work/model.py:12 (layer)", "model.py:12 (layer)"),
        ("unknown", "unknown"),
    ],
)
def test_relative_source(source, expected):
    assert relative_source(source) == expected


def test_package_files_are_named_relative_to_the_package():
    import examples.tools.residuals as module

    assert relative_source(f"{module.__file__}:3:1 (f)") == "examples/tools/residuals.py:3:1 (f)"


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * 2**20, "3.0 MiB")]
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_unknown_description_is_a_clear_error():
    from examples.tools.residuals import _parse

    with pytest.raises(ValueError, match="does not understand"):
        _parse("f32[]", (), np.float32, "saved for reasons unknown")


def test_partial_and_kwargs():
    f = partial(_chain, jnp.ones((5, 4)))
    listing = saved_residuals(f, jnp.ones((6, 5)), jnp.ones((7, 6)), x=jnp.ones(4))
    assert len(listing.of_kind("output")) == 5


@pytest.mark.parametrize(
    ("description", "kind", "detail"),
    [
        ("output of jitted function 'g' from ", "jitted", "g"),
        ("output of remat2 from ", "output", "remat2"),
    ],
)
def test_descriptions_without_a_source(description, kind, detail):
    """JAX leaves the source empty where it knows none (nested jit or linen checkpoint)."""
    from examples.tools.residuals import _parse

    residual = _parse("f32[3]", (3,), np.float32, description)
    assert (residual.kind, residual.detail, residual.source) == (kind, detail, None)
    assert residual.describe() == f"f32[3] {description}"


def test_jitted_function_outputs_are_listed_as_such():
    inner = jax.jit(lambda x: jnp.sin(x) * 2.0)
    listing = saved_residuals(lambda x: inner(x) * 3.0, jnp.arange(3.0))
    jitted = listing.of_kind("jitted")
    assert jitted, str(listing)
    assert all(r.detail == "<lambda>" and r.shape == (3,) for r in jitted)


def test_a_typed_prng_key_is_listed_with_its_extended_dtype():
    """A typed key (``jax.random.key``) has no NumPy dtype; it is listed as JAX lists it."""

    def f(key, x):
        return jnp.sum(jnp.cos(jnp.sin(x) * jax.random.uniform(key, x.shape)))

    key = jax.random.key(0)
    listing = saved_residuals(jax.checkpoint(f), key, jnp.ones(3))
    keys = [r for r in listing if r.argument == "key"]
    assert [r.type_str for r in keys] == ["key<fry>[]"]
    assert keys[0].nbytes == key.dtype.itemsize == 8
    # JAX's own listing names the same arguments.
    with contextlib.redirect_stdout(io.StringIO()) as out:
        print_saved_residuals(jax.checkpoint(f), key, jnp.ones(3))
    assert out.getvalue().count("from the argument key") == 1
