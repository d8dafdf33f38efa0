"""The code behind the JAX Remat Guide, shaped like the site.

Every code cell on the site imports what it runs from this package, and every module is tested
in ``tests/`` at the same path (``examples/S/M.py`` in ``tests/S/test_M.py``;
``tests/test_package.py`` keeps both rules). One subpackage per section of the site, named as
the section is, and the tools every page uses below them:

- :mod:`examples.landing`: the home page's picture of the trade (``docs/index.md``);
- :mod:`examples.questions`: the questions readers bring from public trackers, and the
  section answering each (``docs/questions.md``);
- :mod:`examples.tutorial`: the tutorial (``docs/tutorial/``);
- :mod:`examples.notes`: the migration notes (``docs/notes/``);
- :mod:`examples.howto`: the how-to guides (``docs/howto/``);
- :mod:`examples.problems`: the exercises, found by discovery (``docs/problems/``), and
  :mod:`examples.check`, the learner's checker (``python -m examples.check``, ``remat-check``);
- :mod:`examples.reference`: the policy reference and the page "Across JAX releases"
  (``docs/reference/``);
- :mod:`examples.explorer`: what each policy costs, measured, and remat mistakes, measured
  (``docs/explorer/``; ``python -m examples.explorer``);
- :mod:`examples.tools`: what every page uses (residual listings, compiled measurements,
  tables, the banner); it imports nothing from the sections above it.

Measurements recorded on other machines ship in ``data/`` (read through
:mod:`examples.tools.recorded`).
"""

__all__: list[str] = []
