"""Re-exports the site's reference solution."""

from examples.problems import checkpoint_dot_policy  # noqa: F401
