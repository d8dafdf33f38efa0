"""The migration notes (``docs/notes/``).

- :mod:`examples.notes.new_checkpoint`: JAX's new ``jax.checkpoint`` (PR 11830), checked on the
  installed JAX (``new-checkpoint-implementation.md``), with
  :mod:`examples.notes.compile_time_eval` (computing with static arguments while tracing);
- :mod:`examples.notes.remat3`: the migration guide to JAX's next remat, ``jax_remat3``
  (``jax-remat3.md``), with :mod:`examples.notes.remat3_check`, the one-call check of what the
  flag changes in a function, :mod:`examples.notes.remat3_prepare` (names in place of a dots
  policy, and offloading, flag off and on) and :mod:`examples.notes.custom_remat_rule` (a
  rematerialization rule of a function's own, ``jax.custom_vjp.defremat``).
"""
