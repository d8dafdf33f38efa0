"""The second layer created before the first: each nnx.Linear draws its values from the Rngs in
turn, so the layers get each other's parameters. The structure is right; the value is not, and
the line says what to look at.

expect: fail value gradient
says: create the first layer before the second
"""

import jax
from flax import nnx


class Net(nnx.Module):
    def __init__(self, n, rngs):
        self.b = nnx.Linear(n, n, rngs=rngs)
        self.a = nnx.Linear(n, n, rngs=rngs)

    def __call__(self, x):
        return jax.nn.relu(self.b(jax.nn.relu(self.a(x))))


def nnx_remat_policy(seed, x, features):
    net = Net(int(features), nnx.Rngs(int(seed)))
    forward = nnx.remat(
        lambda net, x: net(x), policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    )
    return forward(net, x).reshape(-1)
