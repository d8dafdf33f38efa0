"""How-to (``docs/howto/scan-transformer.md``, its last section): very deep stacks, a scan of
checkpointed scans.

:func:`nested_scan` applies a layer in two levels of ``jax.lax.scan``, an outer scan over groups
each a checkpointed inner scan, and :func:`nested_depth_study` measures XLA's temporary memory of
its gradient against a plain scan and a scan of the checkpointed layer, at several depths.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from examples.tools.display import Table, format_bytes
from examples.tools.measure import compiled_stats


def nested_scan(
    layer: Callable[[jax.Array, Any], jax.Array], params: Any, x: jax.Array, groups: int
) -> jax.Array:
    """Apply ``layer`` once per slice of the stacked ``params``, in two levels: an outer scan over
    ``groups`` groups, each a checkpointed inner scan over the group's layers.

    The backward pass keeps one carry per group, and rebuilds one group at a time; with ``layer``
    checkpointed too, rebuilding a group keeps one carry per layer of that group. For ``L`` layers,
    ``groups`` near ``√L`` keeps about ``2√L`` carries instead of ``L`` (Flax linen's
    ``nn.remat_scan`` builds the same loops from a module).
    """
    depth = jax.tree.leaves(params)[0].shape[0]
    if depth % groups:
        raise ValueError(f"{depth} layers do not split into {groups} equal groups")
    grouped = jax.tree.map(lambda w: w.reshape(groups, depth // groups, *w.shape[1:]), params)

    @functools.partial(jax.checkpoint, prevent_cse=False)
    def group(h: jax.Array, group_params: Any) -> jax.Array:
        out, _ = jax.lax.scan(lambda h, p: (layer(h, p), None), h, group_params)
        return out

    out, _ = jax.lax.scan(lambda h, p: (group(h, p), None), x, grouped)
    return out


#: The depths of the study, squares so that a group is ``√L`` layers.
NESTED_DEPTHS = (16, 64, 256)
#: Two shapes of the study's layer: a wide batch whose carry (1024 × 64 floats, 256 KiB)
#: outweighs the layer's weights (2 × 64 × 256 floats, 128 KiB), and a narrow one whose weights
#: (2 × 128 × 512 floats, 512 KiB) outweigh its carry (64 × 128 floats, 32 KiB).
NESTED_SHAPES = {"carry larger than weights": (1024, 64), "weights larger than carry": (64, 128)}


def nested_depth_study(
    depths: Sequence[int] = NESTED_DEPTHS, batch: int = 64, width: int = 128
) -> dict[int, dict[str, int]]:
    """XLA's temporary memory of the gradient of a stack of residual MLP layers
    (:func:`examples.tools.models.mlp_layer`) at each depth: a plain scan, a scan of the
    checkpointed layer, and :func:`nested_scan` of the checkpointed layer in ``√L`` groups."""
    from examples.tools.models import mlp_layer, stacked_mlp

    remat_layer = jax.checkpoint(mlp_layer, prevent_cse=False)

    def plain(p: Any, x: jax.Array) -> jax.Array:
        return jax.lax.scan(lambda h, w: (mlp_layer(h, w), None), x, p)[0]

    def one_level(p: Any, x: jax.Array) -> jax.Array:
        return jax.lax.scan(lambda h, w: (remat_layer(h, w), None), x, p)[0]

    out = {}
    for depth in depths:
        params, x = stacked_mlp(depth, batch, width)
        groups = round(depth**0.5)
        layouts: dict[str, Callable[[Any, jax.Array], jax.Array]] = {
            "scan": plain,
            "scan(checkpoint(layer))": one_level,
            f"two levels, {groups} groups": functools.partial(
                nested_scan, remat_layer, groups=groups
            ),
        }
        out[depth] = {
            name: compiled_stats(
                jax.grad(lambda p, x, f=f: jnp.sum(f(p, x) ** 2)), params, x
            ).temp_bytes
            for name, f in layouts.items()
        }
    return out


def nested_table(study: dict[int, dict[str, int]]) -> Table:
    """One row per depth: each layout's temporary memory."""
    first = next(iter(study.values()))
    header = ["layers", *[f"`{name}`" if "groups" not in name else "two levels (√L groups)"
                          for name in first]]  # fmt: skip
    rows = [[str(d), *[format_bytes(b) for b in r.values()]] for d, r in study.items()]
    return Table(header, rows, align=["right"] * len(header))
