"""The code behind the JAX Remat Guide.

Every code cell on the site imports what it runs from this package, and every function here is
unit-tested in ``tests/``. One module per page or concern:

- :mod:`examples.residuals`: what reverse-mode autodiff saves, as a structured listing.
- :mod:`examples.runinfo`: which jax, jaxlib, flax and backend executed a page.
"""

__all__: list[str] = []
