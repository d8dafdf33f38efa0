"""examples.paths: no build-machine path survives."""

from __future__ import annotations

import sys

from examples.paths import scrub_paths


def test_notebook_cells_become_cell():
    text = "File /tmp/ipykernel_1130/1801108376.py:6, in g(W, x)"
    assert scrub_paths(text) == "File <cell>:6, in g(W, x)"


def test_site_packages_prefix_is_dropped():
    text = f"{sys.prefix}/lib/python3.11/site-packages/jax/_src/api.py:100"
    assert scrub_paths(text) == "jax/_src/api.py:100"


def test_repository_root_becomes_relative():
    text = "at /srv/build/checkout/src/examples/tutorial.py:12 and /srv/build/checkout/docs/x.md"
    clean = scrub_paths(text, roots=["/srv/build/checkout"])
    assert clean == "at src/examples/tutorial.py:12 and docs/x.md"


def test_interpreter_prefix_is_named_python():
    text = f"{sys.base_prefix}/lib/python3.11/functools.py:1"
    assert scrub_paths(text).startswith("<python>/lib/python3.11/functools.py")


def test_text_without_paths_is_unchanged():
    text = "f32[5] output of sin from examples/tutorial.py:6:9 (g)\n1/2 = 0.5"
    assert scrub_paths(text, roots=["/srv/x"]) == text


def test_package_files_are_named_from_the_package():
    import examples.migration as module

    text = f"error while tracing step at {module.__file__}:239 for checkpoint"
    assert (
        scrub_paths(text) == "error while tracing step at examples/migration.py:239 for checkpoint"
    )
