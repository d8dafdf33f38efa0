"""The tutorial's two pages: the path (``docs/tutorial/gradient-checkpointing.md``) and its
explanation (``docs/tutorial/how-remat-works.md``).

- :mod:`examples.tutorial.traced`: the traced examples: residuals, ``jax.checkpoint``, policies,
  names, placement;
- :mod:`examples.tutorial.recursive`: recursive checkpointing of a chain of sines, its residuals
  and its cost against their formulas (the explanation);
- :mod:`examples.tutorial.block`: the scanned transformer-shaped block, each policy's residuals
  and XLA's figures, a policy written by hand, offloading (the path);
- :mod:`examples.tutorial.fwd_bwd`: the forward and backward programs of a VJP, side by side;
- :mod:`examples.tutorial.liveness`: the peak of values alive at once in a traced gradient;
- :mod:`examples.tutorial.compiled`: what XLA makes of ``jax.checkpoint`` under ``jax.jit``;
- :mod:`examples.tutorial.patterns`: placements measured by XLA, nested scans, dropout;
- :mod:`examples.tutorial.when_not`: when not to checkpoint (the path).
"""
