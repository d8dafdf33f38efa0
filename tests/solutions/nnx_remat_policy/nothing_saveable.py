"""nnx.remat with a policy that keeps nothing.

expect: fail policy residuals
says: nothing_saveable
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
    net = Net(int(features), nnx.Rngs(int(seed)))
    forward = nnx.remat(lambda net, x: net(x), policy=jax.checkpoint_policies.nothing_saveable)
    return forward(net, x).reshape(-1)
