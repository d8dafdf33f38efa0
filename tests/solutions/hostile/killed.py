"""Kills its own process, as a crash in native code would."""

import os
import signal


def checkpoint_dot_policy(w1, w2, x):
    os.kill(os.getpid(), signal.SIGKILL)
