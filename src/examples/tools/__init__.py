"""The tools every page uses. Nothing here imports from the site's sections.

- :mod:`examples.tools.runinfo`: which jax, jaxlib, flax and backend executed a page (its banner).
- :mod:`examples.tools.paths`: keeps the build machine's paths off the pages.
- :mod:`examples.tools.jaxprs`: walks jaxprs; finds ``jax.checkpoint`` under either implementation.
- :mod:`examples.tools.policy_calls`: a policy read back as the call that made it, on any release.
- :mod:`examples.tools.residuals`: what reverse-mode autodiff saves, as a structured listing.
- :mod:`examples.tools.measure`: XLA's compiled memory and FLOPs; step times with their spread.
- :mod:`examples.tools.display`: tables from rows; bytes and times formatted once; long text folded.
- :mod:`examples.tools.models`: the scan-over-layers models the pages share.
- :mod:`examples.tools.recorded`: measurements recorded on other machines, shipped in ``data/``.
- :mod:`examples.tools.targets`: GPUs and TPUs to compile for without one; their compilers' errors.
- :mod:`examples.tools.plans`: a step compiled for a target and a policy: the compiler's plan.
- :mod:`examples.tools.plan_flops`: a step's FLOPs, the compiler's count and its program's.
- :mod:`examples.tools.plan_records`: plans kept as JSON records; the reference step they check.
- :mod:`examples.tools.prose`: a page's words of prose and words per sentence, as read.
- :mod:`examples.tools.compat`: the few spellings that differ between the JAX releases supported.
"""
