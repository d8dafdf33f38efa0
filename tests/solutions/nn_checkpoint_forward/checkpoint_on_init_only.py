"""The lifted module is used for init only; the forward pass applies a plain MLP. The only
checkpoint wraps init's forward pass, whose products nothing returned reads: it does nothing for
the gradient, and the remat line says so: the products it wraps are thrown away. (Under
jax_remat3 on jax 0.10.2, JAX's dead-code elimination does not look into the checkpoint, so the
remat line still counts them; the residuals line fails it there.)

expect: fail remat residuals
says: apply the nn.checkpoint module, not only init it
expect under remat3 if a checkpoint keeps dead products: fail residuals
says under remat3 if a checkpoint keeps dead products: yours keeps
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
