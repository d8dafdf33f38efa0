"""The reference pages (``docs/reference/``).

- :mod:`examples.reference.policies`: every checkpoint policy of the installed JAX, and what each
  saves (``policies.md``), with :mod:`examples.reference.offload_policies` (where an offloading
  policy's residuals end up);
- :mod:`examples.reference.releases`: what each JAX release does with remat, recorded once per
  release of the matrix (``python -m examples.reference.releases``), with
  :mod:`examples.reference.release_facts` (the facts, measured) and
  :mod:`examples.reference.release_table` (the page's tables) (``releases.md``).
"""
