"""Re-exports the site's reference solution.

expect: pass
"""

from examples.problems.checkpoint_dot_policy import checkpoint_dot_policy  # noqa: F401
