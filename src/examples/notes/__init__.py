"""The migration notes (``docs/notes/``).

- :mod:`examples.notes.new_checkpoint`: JAX's new ``jax.checkpoint`` (PR 11830), checked on the
  installed JAX (``new-checkpoint-implementation.md``);
- :mod:`examples.notes.remat3`: the migration guide to JAX's next remat, ``jax_remat3``
  (``jax-remat3.md``), with :mod:`examples.notes.remat3_check`, the one-call check of what the
  flag changes in a function.
"""
