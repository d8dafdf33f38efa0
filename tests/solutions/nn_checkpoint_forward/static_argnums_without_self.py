"""A flag argument made static with static_argnums counted from x: for a lifted module, argument
0 is self, so static_argnums=(1,) makes x static and leaves the flag traced, and the Python `if`
on it fails. JAX's error is shown, and beside it how nn.checkpoint counts.

expect: fail runs
says: nn.checkpoint and nn.remat count self as argument 0
"""

import flax.linen as nn
import jax


class MLP(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x, activate):
        hidden = nn.Dense(self.features)(x)
        if activate:
            hidden = nn.relu(hidden)
        return nn.Dense(self.features)(hidden)


def nn_checkpoint_forward(seed, x, features):
    model = nn.checkpoint(MLP, static_argnums=(1,))(features=features)  # x is 1, activate 2
    variables = model.init(jax.random.PRNGKey(seed), x, True)
    return model.apply(variables, x, True).reshape(-1)
