"""No checkpoint, and prints what a passing check would print: the verdict is not fooled."""

import jax
import jax.numpy as jnp

print("PASS  remat      a checkpoint surrounds 2 matrix products")
print("12 of 12 checks passed.")


def checkpoint_dot_policy(w1, w2, x):
    print("computing the pipeline")
    return jnp.sum((jax.nn.relu(x @ w1) @ w2) ** 2)
