"""Lifts an instance instead of the class.

expect: fail runs
says: TransformTargetError: Linen transformations must be applied to Modules classes
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
    model = nn.checkpoint(MLP(features=features))
    variables = model.init(jax.random.PRNGKey(seed), x)
    return model.apply(variables, x).reshape(-1)
