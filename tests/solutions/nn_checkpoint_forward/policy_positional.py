"""The policy given by position, nn.checkpoint(MLP, policy): the second positional argument of
nn.checkpoint is variables, the collections to lift, and Flax refuses a function there. Flax's
error is shown, and beside it what it likely means.

expect: fail runs
says: is a policy given by position? Pass it by keyword, policy=...
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
    model = nn.checkpoint(MLP, jax.checkpoint_policies.nothing_saveable)(features=features)
    variables = model.init(jax.random.PRNGKey(seed), x)
    return model.apply(variables, x).reshape(-1)
