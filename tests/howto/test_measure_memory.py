"""examples.howto.measure_memory: the memory guide's instruments, on the installed JAX."""

from __future__ import annotations

import functools
import io
import logging

import jax
import jax.numpy as jnp
import jax.profiler
import numpy as np
import pytest

from examples.howto import measure_memory as mm
from examples.howto import scan_transformer as st
from examples.tools.models import Config
from examples.tools.residuals import saved_residuals

TINY = Config(layers=3, batch=2, seq=16, width=32, heads=2)
CPU = jax.default_backend() == "cpu"


@pytest.fixture(scope="module")
def analysis():
    state = st.init_state(TINY)
    return jax.jit(st.step_fn(TINY, st.BY_LABEL["nothing_saveable"])).lower(*state).compile()


def test_memory_table_lists_every_field_and_planned_total_adds_them(analysis):
    a = analysis.memory_analysis()
    table = mm.memory_table(a)
    assert [row[0] for row in table.rows] == [f"`{name}`" for name, _ in mm.FIELDS]
    expected = (
        a.argument_size_in_bytes
        + a.output_size_in_bytes
        - a.alias_size_in_bytes
        + a.temp_size_in_bytes
    )
    assert mm.planned_total(a) == expected > 0


@pytest.mark.skipif(not CPU, reason="what XLA:CPU's peak estimate counts")
def test_cpu_peak_estimate_leaves_the_temporaries_out(analysis):
    a = analysis.memory_analysis()
    assert a.temp_size_in_bytes > 1024
    in_out = a.argument_size_in_bytes + a.output_size_in_bytes
    if not hasattr(a, "peak_memory_in_bytes"):
        pytest.skip(f"jax {jax.__version__} lacks CompiledMemoryStats.peak_memory_in_bytes")
    assert abs(a.peak_memory_in_bytes - in_out) < a.temp_size_in_bytes / 2


def test_sizing_from_shapes_alone_shows_remat_saving_memory():
    cfg = Config(layers=4, batch=4, seq=128, width=128, heads=4)
    shapes = jax.eval_shape(functools.partial(st.init_state, cfg))
    assert all(isinstance(s, jax.ShapeDtypeStruct) for s in jax.tree.leaves(shapes))
    plans = {
        label: jax.jit(st.step_fn(cfg, st.BY_LABEL[label])).lower(*shapes).compile()
        for label in ("no remat", "nothing_saveable")
    }
    none, remat = (mm.planned_total(p.memory_analysis()) for p in plans.values())
    assert remat < none


@pytest.mark.skipif(not CPU, reason="the CPU backend keeps no device memory counters")
def test_cpu_reports_no_device_memory():
    assert jax.devices()[0].memory_stats() is None
    memory = mm.device_memory()
    assert (memory.reported, memory.peak, memory.limit) == (False, None, None)


def test_jax_has_no_call_that_resets_the_peak():
    # The page: peak_bytes_in_use is a high-water mark since the process started, which this JAX
    # cannot reset (jax-ml/jax#8096), so variants are compared one process each. A release that
    # adds a reset fails this test, and the page must then show it.
    device = jax.devices()[0]
    places = (jax, jax.profiler, type(device), getattr(device, "client", None))
    names = [(p, n) for p in places for n in dir(p)]
    assert [f"{p}.{n}" for p, n in names if "reset" in n.lower() or "peak" in n.lower()] == []


def test_fits_says_nothing_where_the_backend_reports_no_limit(analysis):
    # The page runs mm.fits(analysis, memory) on the backend that builds it.
    memory = mm.device_memory()
    verdict = mm.fits(analysis.memory_analysis(), memory)
    assert verdict is None if memory.limit is None else isinstance(verdict, bool)


class _FakeDevice:
    platform = "gpu"

    def __init__(self, stats):
        self._stats = stats

    def memory_stats(self):
        return self._stats


def test_device_memory_reads_the_counters_and_fits_compares_with_the_limit(analysis):
    a = analysis.memory_analysis()
    total = mm.planned_total(a)
    stats = {"bytes_in_use": 10, "peak_bytes_in_use": 20, "bytes_limit": total}
    memory = mm.device_memory(_FakeDevice(stats))
    assert (memory.in_use, memory.peak, memory.limit, memory.reported) == (10, 20, total, True)
    assert mm.fits(a, memory) is True
    smaller = mm.device_memory(_FakeDevice({**stats, "bytes_limit": total - 1}))
    assert mm.fits(a, smaller) is False
    assert mm.fits(a, mm.device_memory(_FakeDevice(None))) is None


_PROFILE_CHECK = """
import gzip
import jax, jax.numpy as jnp
from examples.howto import measure_memory as mm

kept = jnp.arange(12345, dtype=jnp.float32)
raw = jax.profiler.device_memory_profile()
assert raw[:2] == b"\\x1f\\x8b"
profile = mm.read_profile(raw)
assert profile.sample_types == (("allocations", "count"), ("space", "bytes"))
assert {s.labels.get("kind") for s in profile.samples} <= {"buffer", "executable"}
buffers = profile.of_kind("buffer")
total, live = sum(s.nbytes for s in buffers), sum(a.nbytes for a in jax.live_arrays())
assert total == live, (total, live)
# The array made above is found where it was made.
sites = {mm.allocation_site(s) for s in buffers if s.nbytes == kept.nbytes}
assert any("<string>" in site for site in sites), sites
# The same profile, not compressed, reads the same.
assert mm.read_profile(gzip.decompress(raw)) == profile
table = mm.profile_table(profile)
assert table.rows and all(row[0].startswith("`") for row in table.rows)
print("ok")
"""


def test_profile_decodes_and_its_buffers_are_the_live_arrays():
    """As on the page, in a fresh process: every array alive there is one the profile lists.

    (In the test process other tests leave arrays whose bookkeeping differs, e.g. typed keys.)
    """
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _PROFILE_CHECK], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def test_profile_reader_refuses_an_unknown_wire_type():
    with pytest.raises(ValueError, match="wire type"):
        list(mm._fields(bytes([0x0B])))  # field 1, wire type 3 (a group: not in pprof)


def test_the_residual_logging_flag_names_what_the_block_keeps():
    assert hasattr(jax.config, "jax_log_checkpoint_residuals")
    logger = logging.getLogger("jax._src.ad_checkpoint")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    before = jax.config.jax_log_checkpoint_residuals
    jax.config.update("jax_log_checkpoint_residuals", True)
    try:
        state = st.init_state(TINY)
        setup = st.BY_LABEL['save_only_these_names("qkv", "mlp_pre")']
        jax.jit(st.step_fn(TINY, setup)).lower(*state)
    finally:
        jax.config.update("jax_log_checkpoint_residuals", before)
        logger.removeHandler(handler)
    messages = [m for m in stream.getvalue().split("remat-decorated function") if m.strip()]
    assert messages
    for message in messages:
        assert "named 'qkv'" in message
        assert "named 'mlp_pre'" in message
        # One layer's shapes: no layer axis.
        assert f"float32[{TINY.batch},{TINY.seq},{3 * TINY.width}]" in message


def test_whole_model_residuals_with_the_checkpointed_block():
    params, _, x, y = st.init_state(TINY)
    kept = saved_residuals(st.loss_fn(TINY, st.BY_LABEL["nothing_saveable"]), params, x, y)
    assert len(kept.of_kind("argument")) == len(params)  # the weights
    computed = kept.excluding_arguments()
    shapes = sorted(r.shape for r in computed)
    # The stack of each layer's input, and one array of the loss.
    assert shapes == sorted([(TINY.layers, TINY.batch, TINY.seq, TINY.width), x.shape])
    plain = saved_residuals(st.loss_fn(TINY, st.NO_REMAT), params, x, y).excluding_arguments()
    assert plain.nbytes > 4 * computed.nbytes


@pytest.mark.skipif(not CPU, reason="the CPU backend's out-of-memory message")
def test_out_of_memory_names_the_temporaries_it_could_not_allocate():
    vector = jnp.ones(mm.TOO_BIG_LENGTH)
    compiled = jax.jit(mm.too_big).lower(vector).compile()
    temp = compiled.memory_analysis().temp_size_in_bytes
    assert temp > 2**47  # more than any address space
    # The status code in front of the message depends on the release (RESOURCE_EXHAUSTED on
    # recent ones; INTERNAL or FAILED_PRECONDITION on older ones): the sentence with the number
    # is what every release shares, and the number is what the page reads.
    with pytest.raises(jax.errors.JaxRuntimeError, match="Out of memory") as error:
        compiled(vector).block_until_ready()
    assert mm.oom_bytes(str(error.value)) == temp


def test_oom_bytes_reads_both_wordings():
    assert mm.oom_bytes("RESOURCE_EXHAUSTED: Out of memory allocating 42 bytes.") == 42
    gpu = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 6291456 bytes."
    assert mm.oom_bytes(gpu) == 6291456
    assert mm.oom_bytes("INTERNAL: something else") is None
    # Older releases' CPU wording, with another status code and a prefix.
    old = "INTERNAL: Buffer Definition Event: Error preparing computation: Out of memory allocating"
    assert mm.oom_bytes(f"{old} 562949953421312 bytes.") == 562949953421312


def test_too_big_computes_the_right_value_at_a_small_size():
    x = jnp.arange(1.0, 5.0)
    expected = np.sum(np.cumsum(np.outer(x, x), axis=0)[-1])
    np.testing.assert_allclose(mm.too_big(x), expected)


# --- XLA's buffer assignment ----------------------------------------------------------------------


@pytest.mark.cpu_figures
def test_the_buffer_assignment_dump_explains_the_out_of_memory_number():
    vector = jax.ShapeDtypeStruct((mm.TOO_BIG_LENGTH,), jnp.float32)
    names, text = mm.buffer_assignment(mm.too_big, vector)
    assert any(n.endswith("buffer-assignment.txt") for n in names)
    assert all("/" not in n for n in names)  # names relative to the dump folder
    allocations = mm.read_buffer_assignment(text)
    largest = allocations[0]
    temp = jax.jit(mm.too_big).lower(vector).compile().memory_analysis().temp_size_in_bytes
    # The temporaries are one allocation, the size the out-of-memory error names ...
    assert "temp" in largest.kinds
    assert largest.nbytes == temp
    # ... and the outer product is the largest value in it; the allocation is a whole multiple.
    outer = mm.TOO_BIG_LENGTH**2 * 4
    assert max(v.nbytes for v in largest.values) == outer
    assert largest.nbytes % outer == 0
    full = {v.offset for v in largest.values if v.nbytes == outer}
    assert len(full) == largest.nbytes // outer  # that many full-size arrays, side by side
    # The argument has an allocation of its own.
    assert any("parameter" in a.kinds and a.nbytes == 4 * mm.TOO_BIG_LENGTH for a in allocations)


def test_the_buffer_assignment_reader_on_a_small_text():
    text = """BufferAssignment:
allocation 0: size 16, page 0, parameter 0, shape |f32[4]| at ShapeIndex {}:
 value: <1 x.1 @0> (size=16,offset=0): f32[4]{0}
allocation 1: size 64, preallocated-temp:
 value: <2 fusion @0> (size=32,offset=0): f32[8]{0}
 value: <3 fusion.1 @0> (size=32,offset=32): f32[8]{0}
"""
    first, second = mm.read_buffer_assignment(text)
    assert (first.number, first.nbytes, first.kinds) == (1, 64, "preallocated-temp")
    assert [(v.name, v.nbytes, v.offset) for v in first.values] == [
        ("fusion", 32, 0),
        ("fusion.1", 32, 32),
    ]
    assert second.kinds.startswith("page 0, parameter 0")


def test_a_traced_step_writes_the_files_xprof_reads(tmp_path):
    """The page's Step 4 traces one step with jax.profiler.trace and lists what it wrote: the
    XSpace protobuf that XProf's memory viewer reads, and a trace."""
    step = jax.jit(lambda x: (x @ x).sum())
    x = jnp.ones((64, 64))
    step(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        jax.block_until_ready(step(x))
    written = {p.name.split(".", 1)[1] for p in tmp_path.rglob("*") if p.is_file()}
    assert "xplane.pb" in written
