"""An nnx.jit forward pass inside nnx.remat: right. The checker looks inside the jitted function,
where the values kept are the products the policy keeps.

expect: pass
"""

import jax
from flax import nnx


class Net(nnx.Module):
    def __init__(self, n, rngs):
        self.a = nnx.Linear(n, n, rngs=rngs)
        self.b = nnx.Linear(n, n, rngs=rngs)

    def __call__(self, x):
        return jax.nn.relu(self.b(jax.nn.relu(self.a(x))))


@nnx.jit
def forward(net, x):
    return net(x)


def nnx_remat_policy(seed, x, features):
    net = Net(int(features), nnx.Rngs(int(seed)))
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return nnx.remat(forward, policy=policy)(net, x).reshape(-1)
