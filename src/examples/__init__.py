"""The code behind the JAX Remat Guide.

Every code cell on the site imports what it runs from this package, and every function here is
unit-tested in ``tests/`` (``tests/test_package.py`` checks that this list names every module).

Tools, used by every page:

- :mod:`examples.runinfo`: which jax, jaxlib, flax and backend executed a page (its banner).
- :mod:`examples.paths`: keeps the build machine's paths off the pages.
- :mod:`examples.jaxprs`: walks jaxprs; finds ``jax.checkpoint`` under either implementation.
- :mod:`examples.policy_calls`: a policy read back as the call that made it, on any release.
- :mod:`examples.residuals`: what reverse-mode autodiff saves, as a structured listing.
- :mod:`examples.fwd_bwd`: the forward and backward programs of a VJP, side by side.
- :mod:`examples.liveness`: the peak of values alive at once in a traced gradient.
- :mod:`examples.measure`: XLA's compiled memory and FLOPs; step times with their spread.
- :mod:`examples.display`: tables from rows; bytes and times formatted once; long text folded.
- :mod:`examples.models`: the scan-over-layers models the pages share.
- :mod:`examples.recorded`: measurements recorded on other machines, shipped in ``data/``.
- :mod:`examples.compat`: the few spellings that differ between the JAX releases supported.

One module per page, in the site's order:

- :mod:`examples.landing`: the home page's picture of the trade.
- :mod:`examples.tutorial`, :mod:`examples.tutorial_jit`, :mod:`examples.tutorial_scan`,
  :mod:`examples.tutorial_when_not`: the tutorial.
- :mod:`examples.migration`: the migration notes (PR 11830).
- :mod:`examples.next_remat`, :mod:`examples.remat3_check`: the migration guide to JAX's next
  remat (``jax_remat3``), and the one-call check of what the flag changes in a function.
- :mod:`examples.howto`: the how-to guides, one module per guide.
- :mod:`examples.problems`: the exercises, found by discovery; :mod:`examples.check` is the
  learner's checker (``python -m examples.check``).
- :mod:`examples.policies`, :mod:`examples.offload`: the policy reference.
- :mod:`examples.explorer`: what each policy costs, measured (``python -m examples.explorer``).
- :mod:`examples.pitfalls`: remat mistakes, measured.
- :mod:`examples.releases`, :mod:`examples.release_facts`, :mod:`examples.release_table`: the
  page "Across JAX releases" (its records, the facts measured per release, its tables).
"""

__all__: list[str] = []
