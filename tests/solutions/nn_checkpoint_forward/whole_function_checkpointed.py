"""jax.checkpoint around the whole function, seed and features static, and no nn.checkpoint:
the parameters are made inside the checkpoint, so the backward pass would make them again. The
residuals line names them as parameters and says where to make them.

expect: fail residuals
says: a parameter f32[4] (made by broadcast_in_dim), a parameter f32[3,4] (made by mul)
"""

import functools

import flax.linen as nn
import jax


class MLP(nn.Module):
    features: int

    @nn.compact
    def __call__(self, x):
        hidden = nn.relu(nn.Dense(self.features)(x))
        return nn.Dense(self.features)(hidden)


@functools.partial(jax.checkpoint, static_argnums=(0, 2))
def nn_checkpoint_forward(seed, x, features):
    model = MLP(features=features)
    variables = model.init(jax.random.PRNGKey(seed), x)
    return model.apply(variables, x).reshape(-1)
