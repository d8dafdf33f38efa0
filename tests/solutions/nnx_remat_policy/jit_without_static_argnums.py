"""The whole function under @jax.jit, with no static_argnums: jit traces seed and features, and
int(features) needs a Python number. The hint blames jit's tracing, not the checkpoint's.

expect: fail runs
says: on a value that jax.jit traces
"""

import jax
from flax import nnx


class Net(nnx.Module):
    def __init__(self, n, rngs):
        self.a = nnx.Linear(n, n, rngs=rngs)
        self.b = nnx.Linear(n, n, rngs=rngs)

    def __call__(self, x):
        return jax.nn.relu(self.b(jax.nn.relu(self.a(x))))


def forward(net, x):
    return net(x)


@jax.jit
def nnx_remat_policy(seed, x, features):
    net = Net(int(features), nnx.Rngs(seed))
    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return nnx.remat(forward, policy=policy)(net, x).reshape(-1)
