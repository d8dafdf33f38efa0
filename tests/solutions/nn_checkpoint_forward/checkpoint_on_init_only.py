"""The lifted module is used for init only; the forward pass applies a plain MLP. The only
checkpoint wraps init's forward pass, whose products nothing returned reads: it does nothing for
the gradient, and the remat line says so rather than counting the products it wraps.

expect: fail remat residuals
says: surrounds 0 of the 2 matrix products
"""

import flax.linen as nn
import jax


class MLP(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        hidden = nn.relu(nn.Dense(self.features)(x))
        return nn.Dense(self.features)(hidden)


def nn_checkpoint_forward(seed, x, features):
    variables = nn.checkpoint(MLP)(features=features).init(jax.random.key(seed), x)
    return MLP(features=features).apply(variables, x).reshape(-1)
