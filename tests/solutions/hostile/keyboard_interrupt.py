"""Raises KeyboardInterrupt, which `except Exception` does not catch."""


def checkpoint_dot_policy(w1, w2, x):
    raise KeyboardInterrupt
