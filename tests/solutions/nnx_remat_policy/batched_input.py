"""Right: the model is applied to x[None, :], a batch of one, and the output flattened. The
products the policy keeps are the reference's in another layout (f32[1,n] for f32[n]); it
passes, and the residuals line says so.

expect: pass
says: a value kept in another layout
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

    @nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def forward(net, x):
        return net(x)

    return forward(net, x[None, :]).reshape(-1)
