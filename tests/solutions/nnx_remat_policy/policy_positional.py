"""The policy passed positionally: nnx.remat takes it for the function to transform.

expect: fail runs
says: your code raised TypeError
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

    @nnx.remat(jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def forward(net, x):
        return net(x)

    return forward(net, x).reshape(-1)
