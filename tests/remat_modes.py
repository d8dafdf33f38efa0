"""The two remat implementations a test runs under: JAX's default (``remat2``) and ``jax_remat3``.

``REMAT_MODES`` parametrizes a test over them (``True`` for ``jax_remat3``; that case is skipped,
with its reason, on a JAX without the flag). The ``remat3`` fixture of ``conftest.py`` runs a
test under each with the flag switched for the test's duration.
"""

from __future__ import annotations

import pytest

from examples.tools import jaxprs

REMAT_MODES = [
    pytest.param(False, id="remat2"),
    pytest.param(
        True,
        id="remat3",
        marks=pytest.mark.skipif(
            not jaxprs.remat3_available(), reason="this JAX has no jax_remat3 flag"
        ),
    ),
]
