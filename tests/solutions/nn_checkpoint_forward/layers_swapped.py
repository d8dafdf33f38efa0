"""Right architecture, but the outer Dense is created first, so it is named Dense_0 and gets
the first layer's random initial values: the output differs from the reference.

expect: fail value gradient
says: create the two Dense layers in the order they are applied
"""

import flax.linen as nn
import jax


class MLP(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features)(nn.relu(nn.Dense(self.features)(x)))


def nn_checkpoint_forward(seed, x, features):
    model = nn.checkpoint(MLP)(features=features)
    variables = model.init(jax.random.PRNGKey(seed), x)
    return model.apply(variables, x).reshape(-1)
