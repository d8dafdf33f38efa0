"""examples.howto.offload_findings: the sentences the sharded-step guide says of a recorded
offload run, on a run made up here (independent of any compile) and on the committed H200 run."""

from __future__ import annotations

import dataclasses

from examples.howto import offload as o
from examples.howto.offload_findings import copy_rates, findings
from examples.tools.models import SIZES

#: Device memory per policy of the made-up run: each offload keeps as little as recomputing
#: everything, each twin more.
TEMP = {"nothing_saveable": 100, **{off: 100 for off in o.ON_DEVICE}}
TEMP |= {twin: 300 for twin in o.ON_DEVICE.values()}

#: Bytes each offload copies to the host and back per step in the made-up run: 1 GB each way.
MOVED = {off: (10**9, 10**9) for off in o.ON_DEVICE}


def _fake_gpu_run():
    info = {"jax": "0", "jaxlib": "0", "device": "Test GPU", "backend": "gpu"}
    results = [
        o.Result(policy, *MOVED.get(policy, (0, 0)), 0, 0, TEMP.get(policy, 200), 0, None, None)
        for policy in o.POLICIES
    ]
    return o.Run(info, SIZES["tiny"], results)


def _timed(run, seconds):
    """``run`` with each policy's step timed at ``seconds[policy]`` (a range of ±1 %)."""
    step = lambda s: {"median_s": s, "min_s": s * 0.99, "max_s": s * 1.01, "repeats": 7}
    results = [dataclasses.replace(r, step=step(seconds[r.policy])) for r in run.results]
    return dataclasses.replace(run, results=results)


def test_findings_order_steps_only_where_the_ranges_do_not_overlap():
    gpu = _fake_gpu_run()
    twin = o.ON_DEVICE[o.OFFLOAD_NAMES]
    base = {r.policy: 0.1 for r in gpu.results}
    # The offloads twice as slow as everything else: slower, with the ratio, and the closing
    # caveat; recomputing everything is as small (TEMP) and faster: the offload buys nothing.
    slow = _timed(gpu, base | {off: 0.2 for off in o.ON_DEVICE})
    text = findings([slow])._repr_markdown_()
    assert "Test GPU" in text
    assert f"`{o.OFFLOAD_NAMES}`, against `{twin}`" in text
    assert "a step 2.00× slower (200 ms against 100 ms" in text
    assert "measure your own step" in text
    # 2 GB moved in 100 ms more: 20 GB/s, the copies added to the step.
    assert set(copy_rates(slow).values()) == {2e10}
    assert "back takes at 20 GB/s" in text
    assert "20 to 20 GB/s" in text
    assert text.count("this offload buys nothing") == len(o.ON_DEVICE)
    # Where recomputing everything needs more device memory than the offload, it is not said.
    bigger = [
        dataclasses.replace(r, temp_bytes=500) if r.policy == "nothing_saveable" else r
        for r in slow.results
    ]
    assert "buys nothing" not in findings([dataclasses.replace(slow, results=bigger)]).text
    # Within each other's range: no order, no verdict, no caveat.
    close = _timed(gpu, base | {off: 0.1005 for off in o.ON_DEVICE})
    text = findings([close])._repr_markdown_()
    assert "within the noise" in text
    for said in ("slower", "faster", "buys nothing", "measure your own step"):
        assert said not in text
    # Faster offloads are called faster, with the ratio the other way round.
    fast = _timed(gpu, base | {off: 0.05 for off in o.ON_DEVICE})
    assert "a step 2.00× faster (50 ms against 100 ms" in findings([fast])._repr_markdown_()
    # No accelerator run, nothing said; a CPU run says nothing of offload.
    cpu = dataclasses.replace(slow, runinfo={**slow.runinfo, "backend": "cpu"})
    assert findings([])._repr_markdown_() == findings([cpu])._repr_markdown_() == ""


def test_the_committed_h200_run_is_read_as_the_page_reads_it():
    # The H200 run (jax 0.11.2): each offload saved device memory against its twin, and stepped
    # slower than it, by ranges that do not overlap.
    (run,) = [r for r in o.load_all() if r.runinfo["device"] == "NVIDIA H200"]
    saved = o.device_memory_saved(run.results)
    assert set(saved) == set(o.ON_DEVICE)
    assert all(b > 0 for b in saved.values())
    text = findings([run])._repr_markdown_()
    assert text.count("slower") == 4
    assert "within the noise" not in text
    # choose-policy says so: the offload of mlp_hidden buys nothing over recomputing everything.
    (names,) = [line for line in text.splitlines() if line.startswith(f"- `{o.OFFLOAD_NAMES}`")]
    assert "this offload buys nothing" in names
    # Every offload's slowdown is its bytes at one host link's rate: the copies did not overlap.
    rates = copy_rates(run)
    assert set(rates) == set(o.ON_DEVICE)
    assert all(40e9 < r < 70e9 for r in rates.values()), rates
