"""JAX's persistent compilation cache, which the nox sessions share (noxfile.py's jax_cache_env).

The sessions point JAX_COMPILATION_CACHE_DIR at _build/jax-cache so that the site build, the tests
and the notebooks run compile each program once. That is only safe if a cached program measures
exactly as a freshly compiled one (the pages print memory and cost analyses and compiled HLO), and
if a changed input misses the cache instead of reading another program's entry. Each run below is
a fresh Python process, as the sessions are.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

#: The debug tables at the top of a compiled module's text (source files, functions, locations,
#: stack frames) and each instruction's metadata, which points into them.
DEBUG_TABLE = re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)\n(?:.+\n)*", re.M)
METADATA = re.compile(r", metadata=\{[^}]*\}")


def program(hlo: str) -> str:
    """A compiled module's text without its debug tables and source metadata."""
    return METADATA.sub("", DEBUG_TABLE.sub("", hlo))


PROBE = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp

    events = []
    jax.monitoring.register_event_listener(lambda name, **kw: events.append(name))
    width = int(sys.argv[1])

    def loss(w, x):
        h = x
        for _ in range(4):
            h = jax.checkpoint(lambda h: jnp.tanh(h @ w))(h)
        return h.sum()

    x, w = jnp.ones((64, width)), jnp.ones((width, width))
    compiled = jax.jit(jax.grad(loss)).lower(w, x).compile()
    costs = compiled.cost_analysis()
    costs = costs[0] if isinstance(costs, list) else costs
    print(json.dumps({
        "temp": compiled.memory_analysis().temp_size_in_bytes,
        "flops": costs["flops"],
        "hlo": compiled.as_text(),
        "hits": events.count("/jax/compilation_cache/cache_hits"),
        "misses": events.count("/jax/compilation_cache/cache_misses"),
    }))
    """
)


def run_probe(probe: str, argument: str, cache: Path | None) -> str:
    """Run ``probe`` in a fresh Python on the CPU, JAX's cache in ``cache`` (none: no cache)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["JAX_PLATFORMS"] = "cpu"
    if cache is not None:
        env |= {
            "JAX_COMPILATION_CACHE_DIR": str(cache),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
        }
    out = subprocess.run(
        [sys.executable, "-c", probe, argument],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    return out.stdout


def run(width: int, cache: Path | None) -> dict:
    return json.loads(run_probe(PROBE, str(width), cache).strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    cache = tmp_path_factory.mktemp("jax-cache")
    return {
        "uncached": run(32, None),
        "first": run(32, cache),
        "again": run(32, cache),
        "other shape": run(48, cache),
        "entries": {"count": len(list(cache.iterdir()))},
    }


def test_the_first_run_compiles_and_writes_the_cache(runs: dict[str, dict]) -> None:
    assert runs["first"]["hits"] == 0
    assert runs["first"]["misses"] > 0
    assert runs["entries"]["count"] >= runs["first"]["misses"]


def test_the_same_programs_in_a_new_process_are_read_from_the_cache(runs: dict[str, dict]) -> None:
    assert runs["again"]["misses"] == 0
    assert runs["again"]["hits"] == runs["first"]["misses"]


def test_a_cached_program_measures_as_a_fresh_compile(runs: dict[str, dict]) -> None:
    for key in ("temp", "flops"):
        assert runs["again"][key] == runs["uncached"][key], key
    # The same instructions; only the order of the source-location tables may differ, so a page
    # that compares compiled programs must compare them without these tables.
    assert program(runs["again"]["hlo"]) == program(runs["uncached"]["hlo"])
    assert "FileNames" not in program(runs["again"]["hlo"])


def test_a_changed_input_misses_the_cache(runs: dict[str, dict]) -> None:
    # Another shape is another program: the gradient's programs miss (a shape-free helper
    # program may still hit), and the measurements are the new program's.
    assert runs["other shape"]["misses"] > 0
    assert runs["other shape"]["temp"] != runs["again"]["temp"]
    assert runs["other shape"]["flops"] > runs["again"]["flops"]


DUMP_PROBE = textwrap.dedent(
    """
    import os, sys, tempfile
    import jax, jax.numpy as jnp
    from examples.tools.measure import persistent_cache_off

    def dumped(off):
        with tempfile.TemporaryDirectory() as folder:
            lowered = jax.jit(lambda x: jnp.outer(x, x).sum()).lower(jnp.ones(64))
            options = {"xla_dump_to": folder}
            if off:
                with persistent_cache_off():
                    lowered.compile(compiler_options=options)
            else:
                lowered.compile(compiler_options=options)
            return any(n.endswith("buffer-assignment.txt") for n in os.listdir(folder))

    print(dumped(sys.argv[1] == "off"), jax.config.jax_enable_compilation_cache)
    """
)


@pytest.mark.slow
def test_a_dump_needs_the_persistent_cache_off(tmp_path: Path) -> None:
    """A program read from the cache is not compiled, so XLA dumps nothing for it; inside
    examples.tools.measure.persistent_cache_off it is compiled (and the cache is on again after)."""

    def probe(mode: str) -> list[str]:
        return run_probe(DUMP_PROBE, mode, tmp_path).split()

    assert probe("on") == ["True", "True"]  # compiled for the first time: dumped, and cached
    assert probe("on") == ["False", "True"]  # read from the cache: no dump
    assert probe("off") == ["True", "True"]  # compiled again, and the cache is on afterwards


DONATION_PROBE = textwrap.dedent(
    """
    import contextlib, json, sys
    import jax, jax.numpy as jnp
    from examples.tools.measure import persistent_cache_off

    def step(p, x):
        return p - 0.1 * jax.grad(lambda p: jnp.sum(jnp.tanh(x @ p)))(p)

    # The process's first compilation of the step: JAX also keeps executables in memory.
    with persistent_cache_off() if sys.argv[1] == "off" else contextlib.nullcontext():
        lowered = jax.jit(step, donate_argnums=0).lower(jnp.ones((64, 64)), jnp.ones((8, 64)))
        alias = lowered.compile().memory_analysis().alias_size_in_bytes
    print(json.dumps({"alias": alias, "jax": jax.__version__}))
    """
)


@pytest.mark.slow
def test_a_donated_program_read_from_the_cache_reports_its_aliasing_from_jax_0_6(tmp_path: Path):
    """jax 0.5's executables read back from the cache report ``alias_size_in_bytes`` 0; compiled
    inside ``persistent_cache_off()`` they report it (examples.howto.scan_transformer.buffers)."""

    def alias(mode: str, cache: Path | None) -> tuple[int, tuple[int, ...]]:
        out = json.loads(run_probe(DONATION_PROBE, mode, cache).strip().splitlines()[-1])
        return out["alias"], tuple(int(part) for part in out["jax"].split(".")[:2])

    parameters = 64 * 64 * 4
    assert alias("on", None)[0] == parameters  # no cache at all
    assert alias("on", tmp_path)[0] == parameters  # compiled, and written to the cache
    read, release = alias("on", tmp_path)  # read back from the cache
    assert read == (0 if release < (0, 6) else parameters)
    assert alias("off", tmp_path)[0] == parameters  # the cache there, and left alone
