"""The right value without nnx.remat.

expect: fail remat policy residuals
says: no checkpoint in the traced function
"""

import jax
from flax import nnx


class Net(nnx.Module):
    def __init__(self, n, rngs):
        self.a = nnx.Linear(n, n, rngs=rngs)
        self.b = nnx.Linear(n, n, rngs=rngs)

    def __call__(self, x):
        return jax.nn.relu(self.b(jax.nn.relu(self.a(x))))


def nnx_remat_policy(seed, x, features):
    return Net(int(features), nnx.Rngs(int(seed)))(x).reshape(-1)
