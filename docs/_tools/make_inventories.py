"""Write the small Sphinx inventories (objects.inv) that link API names to the JAX and Flax docs.

The site links names such as ``jax.checkpoint`` or ``flax.nnx.remat`` to their upstream pages
through :mod:`sphinx.ext.intersphinx`. Fetching the real inventories would need the network at
build time, so the few names the guide uses are listed here, with the page each one lives on, and
written as inventories into ``docs/_inventories/`` (committed). Run after editing the lists:

    .venv/bin/python docs/_tools/make_inventories.py

``tests/test_site.py`` checks that the committed files match these lists. Each URL follows the
upstream layout: JAX's API pages are ``_autosummary/<name>.html`` on https://docs.jax.dev, Flax
NNX documents its transforms on ``api_reference/flax.nnx/transforms.html#<name>``, and Linen lives
on its own site, https://flax-linen.readthedocs.io.
"""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "_inventories"

#: The twelve public names of ``jax.checkpoint_policies`` in JAX 0.10 to 0.12.
POLICIES = [
    "checkpoint_dots",
    "checkpoint_dots_with_no_batch_dims",
    "dots_saveable",
    "dots_with_no_batch_dims_saveable",
    "everything_saveable",
    "nothing_saveable",
    "offload_dot_with_no_batch_dims",
    "save_and_offload_only_these_names",
    "save_any_names_but_these",
    "save_anything_except_these_names",
    "save_from_both_policies",
    "save_only_these_names",
]
#: Policies without a page of their own upstream: they link to JAX's remat tutorial instead.
_UNDOCUMENTED_POLICIES = {"save_anything_except_these_names", "save_from_both_policies"}
_JAX_TUTORIAL = "gradient-checkpointing.html"
_ERRORS = "errors.html"


def _autosummary(name: str) -> str:
    return f"_autosummary/{name}.html"


def jax_objects() -> list[tuple[str, str, str]]:
    """(name, role, location relative to https://docs.jax.dev/en/latest/) for each JAX name."""
    objects = [
        ("jax", "py:module", "jax.html"),
        ("jax.numpy", "py:module", "jax.numpy.html"),
        ("jax.lax", "py:module", "jax.lax.html"),
        ("jax.checkpoint_policies", "py:module", _JAX_TUTORIAL),
        ("jax.ad_checkpoint", "py:module", _JAX_TUTORIAL),
        ("jax.checkpoint", "py:function", _autosummary("jax.checkpoint")),
        # jax.remat is jax.checkpoint under a second name; upstream documents it on that page.
        ("jax.remat", "py:function", _autosummary("jax.checkpoint")),
        ("jax.ad_checkpoint.checkpoint_name", "py:function", None),
        ("jax.ad_checkpoint.print_saved_residuals", "py:function", _JAX_TUTORIAL),
        ("jax.custom_vjp", "py:class", None),
        ("jax.custom_jvp", "py:class", None),
        ("jax.custom_batching.custom_vmap", "py:class", None),
        ("jax.random.key", "py:function", None),
        ("jax.random.PRNGKey", "py:function", None),
        ("jax.random.split", "py:function", None),
        ("jax.lax.dot_general", "py:function", None),
        ("jax.lax.optimization_barrier", "py:function", None),
        # The sharded-step guide (howto/sharded-step): meshes, shardings, collectives, export.
        ("jax.sharding", "py:module", "jax.sharding.html"),
        ("jax.sharding.Mesh", "py:class", "jax.sharding.html#jax.sharding.Mesh"),
        ("jax.sharding.NamedSharding", "py:class", "jax.sharding.html#jax.sharding.NamedSharding"),
        ("jax.sharding.PartitionSpec", "py:class", "jax.sharding.html#jax.sharding.PartitionSpec"),
        ("jax.lax.with_sharding_constraint", "py:function", None),
        ("jax.lax.all_gather", "py:function", None),
        ("jax.lax.pmean", "py:function", None),
        ("jax.export.export", "py:function", None),
        # The how-to guides on policies and memory.
        ("jax.nn.dot_product_attention", "py:function", None),
        ("jax.ShapeDtypeStruct", "py:class", None),
        ("jax.profiler.save_device_memory_profile", "py:function", None),
        ("jax.profiler.device_memory_profile", "py:function", None),
        ("jax.stages.Compiled", "py:class", "jax.stages.html#jax.stages.Compiled"),
        (
            "jax.stages.Compiled.memory_analysis",
            "py:method",
            "jax.stages.html#jax.stages.Compiled.memory_analysis",
        ),
        (
            "jax.stages.Compiled.cost_analysis",
            "py:method",
            "jax.stages.html#jax.stages.Compiled.cost_analysis",
        ),
        # The symptom-to-fix guide (howto/when-remat-goes-wrong): the errors a static argument
        # raises when it is traced.
        *(
            (f"jax.errors.{name}", "py:class", f"{_ERRORS}#jax.errors.{name}")
            for name in ("ConcretizationTypeError", "TracerBoolConversionError")
        ),
    ]
    for name in [
        "grad",
        "value_and_grad",
        "vjp",
        "jvp",
        "linearize",
        "jit",
        "vmap",
        "make_jaxpr",
        "eval_shape",
        "ensure_compile_time_eval",
        "named_call",
        "named_scope",
        "shard_map",
        "device_put",
        "devices",
        "make_mesh",
    ]:
        objects.append((f"jax.{name}", "py:function", None))
    for name in ["scan", "fori_loop", "while_loop", "cond", "map"]:
        objects.append((f"jax.lax.{name}", "py:function", None))
    for name in POLICIES:
        location = _JAX_TUTORIAL if name in _UNDOCUMENTED_POLICIES else None
        objects.append((f"jax.checkpoint_policies.{name}", "py:function", location))
    return [(n, r, loc or _autosummary(n)) for n, r, loc in objects]


def flax_objects() -> list[tuple[str, str, str]]:
    """Flax NNX names, relative to https://flax.readthedocs.io/en/latest/."""
    transforms = "api_reference/flax.nnx/transforms.html"
    objects = [("flax.nnx", "py:module", "api_reference/flax.nnx/index.html")]
    # The functions upstream documents on its transforms page (docs_nnx/.../transforms.rst).
    for name in ["remat", "scan", "jit", "grad", "value_and_grad", "vmap", "custom_vjp"]:
        objects.append((f"flax.nnx.{name}", "py:function", f"{transforms}#flax.nnx.{name}"))
    objects += [
        ("flax.nnx.Module", "py:class", "api_reference/flax.nnx/module.html#flax.nnx.Module"),
        ("flax.nnx.Linear", "py:class", "api_reference/flax.nnx/nn/linear.html#flax.nnx.Linear"),
        ("flax.nnx.Rngs", "py:class", "api_reference/flax.nnx/rnglib.html#flax.nnx.Rngs"),
        # The NNX how-to guide (howto/remat-nnx): the optimizer, the functional API, split_rngs.
        (
            "flax.nnx.Optimizer",
            "py:class",
            "api_reference/flax.nnx/training/optimizer.html#flax.nnx.optimizer.Optimizer",
        ),
        (
            "flax.nnx.split_rngs",
            "py:function",
            "api_reference/flax.nnx/rnglib.html#flax.nnx.split_rngs",
        ),
    ]
    for name in ["split", "merge", "update"]:
        objects.append(
            (
                f"flax.nnx.{name}",
                "py:function",
                f"api_reference/flax.nnx/graph.html#flax.nnx.{name}",
            )
        )
    return objects


def flax_linen_objects() -> list[tuple[str, str, str]]:
    """Flax Linen names, relative to https://flax-linen.readthedocs.io/en/latest/."""
    transformations = "api_reference/flax.linen/transformations.html"
    objects = [
        ("flax.linen", "py:module", "api_reference/flax.linen/index.html"),
        # nn.checkpoint and nn.remat are one function; upstream documents it under `remat`
        # (docs/api_reference/flax.linen/transformations.rst: `.. autofunction:: remat`).
        ("flax.linen.checkpoint", "py:function", f"{transformations}#flax.linen.remat"),
        ("flax.linen.remat", "py:function", f"{transformations}#flax.linen.remat"),
    ]
    for name in ["scan", "remat_scan", "jit", "vmap"]:
        objects.append(
            (f"flax.linen.{name}", "py:function", f"{transformations}#flax.linen.{name}")
        )
    objects += [
        ("flax.linen.Module", "py:class", "api_reference/flax.linen/module.html#flax.linen.Module"),
        ("flax.linen.Dense", "py:class", "api_reference/flax.linen/layers.html#flax.linen.Dense"),
    ]
    return objects


#: file stem -> (project name written in the header, objects)
INVENTORIES = {
    "jax": ("JAX", jax_objects),
    "flax": ("Flax", flax_objects),
    "flax_linen": ("Flax Linen", flax_linen_objects),
}


def body(objects: list[tuple[str, str, str]]) -> str:
    """An inventory's compressed part: a `name role priority location dispname` line per name."""
    lines = []
    for name, role, location in sorted(objects):
        # `-` as the display name means "the name itself"; priority 1 is an ordinary entry.
        lines.append(f"{name} {role} 1 {location} -\n")
    return "".join(lines)


def render(project: str, objects: list[tuple[str, str, str]]) -> bytes:
    header = (
        "# Sphinx inventory version 2\n"
        f"# Project: {project}\n"
        "# Version: latest\n"
        "# The remainder of this file is compressed using zlib.\n"
    )
    return header.encode() + zlib.compress(body(objects).encode(), 9)


def write(out: Path = OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, (project, objects) in INVENTORIES.items():
        path = out / f"{stem}.inv"
        path.write_bytes(render(project, objects()))
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder to write (default {OUT})")
    for path in write(parser.parse_args().out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
