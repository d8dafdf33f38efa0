"""The reference pages (``docs/reference/``).

- :mod:`examples.reference.policies`: every checkpoint policy of the installed JAX, and what each
  saves (``policies.md``), with :mod:`examples.reference.offload_policies` (where an offloading
  policy's residuals end up), :mod:`examples.reference.policy_differences` (what the policies do
  where releases differ, detected on the installed JAX) and
  :mod:`examples.reference.policy_scope` (where a policy reaches, and what it costs: nested
  checkpoints, a name inside a ``custom_vjp`` rule, a layer of the reader's own);
- :mod:`examples.reference.releases`: what each JAX release does with remat, recorded once per
  release of the matrix (``python -m examples.reference.releases``), with
  :mod:`examples.reference.release_facts` (the facts, measured) and
  :mod:`examples.reference.release_table` (the page's tables of the facts) and
  :mod:`examples.reference.release_runs` (how each release's run went: its tests, the seconds
  it took, the machine) (``releases.md``);
- :mod:`examples.reference.release_views`: one view per release of the matrix, what a reader
  pinned to that release sees otherwise (``releases/jax-X.md``).
"""
