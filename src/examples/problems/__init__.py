"""Three exercises, each with a reference solution, a float64 reference and checks.

One module per problem, named for the API it practises:

- :mod:`examples.problems.jax_checkpoint`: ``jax.checkpoint`` with a policy.
- :mod:`examples.problems.linen_checkpoint`: Flax linen ``nn.checkpoint`` on a module class.
- :mod:`examples.problems.nnx_remat`: Flax NNX ``nnx.remat`` with a policy.

``python -m examples.check PROBLEM FILE`` runs a problem's checks on a learner's solution.
"""

from __future__ import annotations

from examples.problems import jax_checkpoint as _p1
from examples.problems import linen_checkpoint as _p2
from examples.problems import nnx_remat as _p3
from examples.problems._common import Case, CheckResult, Problem

checkpoint_dot_policy = _p1.checkpoint_dot_policy
nn_checkpoint_forward = _p2.nn_checkpoint_forward
nnx_remat_policy = _p3.nnx_remat_policy

#: The problems by id (the function's name), in the order the site lists them.
PROBLEMS: dict[str, Problem] = {p.name: p for p in (_p1.PROBLEM, _p2.PROBLEM, _p3.PROBLEM)}

__all__ = [
    "PROBLEMS",
    "Case",
    "CheckResult",
    "Problem",
    "checkpoint_dot_policy",
    "nn_checkpoint_forward",
    "nnx_remat_policy",
]
