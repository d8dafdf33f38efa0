"""The module is built inside the function nnx.remat transforms: its parameters are made inside
the checkpoint, so the backward pass would make them again. The residuals line names them as
parameters and says to build the model outside.

expect: fail residuals
says: the parameters are made inside your checkpoint, so the backward pass would make them again
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
    @nnx.remat(policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    def forward(x):
        net = Net(int(features), nnx.Rngs(int(seed)))
        return net(x)

    return forward(x).reshape(-1)
