"""examples.tools.paths: no build-machine path survives."""

from __future__ import annotations

import sys

from examples.tools.paths import scrub_paths


def test_notebook_cells_become_cell():
    text = "File /tmp/ipykernel_1130/1801108376.py:6, in g(W, x)"
    assert scrub_paths(text) == "File <cell>:6, in g(W, x)"


def test_site_packages_prefix_is_dropped():
    text = f"{sys.prefix}/lib/python3.11/site-packages/jax/_src/api.py:100"
    assert scrub_paths(text) == "jax/_src/api.py:100"


def test_repository_root_becomes_relative():
    text = "at /srv/build/checkout/src/examples/tutorial/traced.py:12 and /srv/build/checkout/d.md"
    clean = scrub_paths(text, roots=["/srv/build/checkout"])
    assert clean == "at src/examples/tutorial/traced.py:12 and d.md"


def test_interpreter_prefix_is_named_python():
    text = f"{sys.base_prefix}/lib/python3.11/functools.py:1"
    assert scrub_paths(text).startswith("<python>/lib/python3.11/functools.py")


def test_text_without_paths_is_unchanged():
    text = "f32[5] output of sin from examples/tutorial/traced.py:6:9 (g)\n1/2 = 0.5"
    assert scrub_paths(text, roots=["/srv/x"]) == text


def test_package_files_are_named_from_the_package():
    import examples.notes.new_checkpoint as module

    text = f"error while tracing step at {module.__file__}:239 for checkpoint"
    assert (
        scrub_paths(text)
        == "error while tracing step at examples/notes/new_checkpoint.py:239 for checkpoint"
    )
