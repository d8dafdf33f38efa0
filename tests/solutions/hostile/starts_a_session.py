"""A right solution that starts a process in a session of its own (outside the child's process
group) and one more, double-forked, whose parent ends at once; the pids go to a file named by
the environment variable REMAT_CHECK_TEST_PIDS, so that the test can see them ended."""

import os
import subprocess

import jax

sleeper = subprocess.Popen(["sleep", "300"], start_new_session=True)
orphan = subprocess.Popen(
    ["sh", "-c", "setsid sleep 300 >/dev/null 2>&1 & echo $!"], stdout=subprocess.PIPE, text=True
)
orphan_pid = int(orphan.communicate()[0])
with open(os.environ["REMAT_CHECK_TEST_PIDS"], "w") as pids:
    pids.write(f"{sleeper.pid} {orphan_pid}\n")


def checkpoint_dot_policy(w1, w2, x):
    def pipeline(w1, w2, x):
        y = jax.numpy.maximum(x @ w1, 0.0)
        return jax.numpy.sum(jax.numpy.square(y @ w2))

    policy = jax.checkpoint_policies.dots_with_no_batch_dims_saveable
    return jax.checkpoint(pipeline, policy=policy)(w1, w2, x)
