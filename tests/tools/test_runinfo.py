"""examples.tools.runinfo: the versions and backend a page was executed with, and its banner."""

from __future__ import annotations

import dataclasses
import sys

import flax
import jax
import jaxlib

from examples.tools import runinfo


def test_collect_reads_the_versions_of_this_process():
    info = runinfo.collect()
    assert info.jax == jax.__version__
    assert info.jaxlib == jaxlib.__version__
    assert info.flax == flax.__version__
    assert info.python.startswith(f"{sys.version_info.major}.{sys.version_info.minor}.")


def test_collect_reads_the_default_backend_and_its_devices():
    info = runinfo.collect()
    devices = jax.devices()
    assert info.backend == jax.default_backend()
    assert info.device == devices[0].device_kind
    assert info.device_count == len(devices)


def test_as_dict_holds_every_field():
    info = runinfo.collect()
    fields = [f.name for f in dataclasses.fields(runinfo.RunInfo)]
    assert list(info.as_dict()) == fields
    assert info.as_dict() == {name: getattr(info, name) for name in fields}


def test_one_line_names_the_versions_and_counts_several_devices():
    one = runinfo.RunInfo("0.7.2", "0.7.1", "0.12.0", "3.11.7", "gpu", "NVIDIA H100", 1)
    assert one.one_line() == (
        "jax 0.7.2 · jaxlib 0.7.1 · flax 0.12.0 · backend gpu (NVIDIA H100) · Python 3.11.7"
    )
    eight = dataclasses.replace(one, device_count=8)
    assert "backend gpu (8 × NVIDIA H100)" in eight.one_line()


def test_banner_is_text_outside_a_notebook_and_escaped_html_inside():
    info = runinfo.RunInfo("0.7.2", "0.7.2", "0.12.0", "3.11.7", "cpu", "<cpu & co>", 1)
    note = runinfo.Banner(info)
    assert repr(note) == f"Executed with {info.one_line()}"
    html = note._repr_html_()
    assert html.startswith('<p class="remat-runinfo"><strong>Executed with</strong> ')
    assert "(&lt;cpu &amp; co&gt;)" in html
    assert "<cpu" not in html


def test_banner_describes_this_process():
    assert runinfo.banner().info == runinfo.collect()
