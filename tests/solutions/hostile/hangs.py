"""Never returns: the checker's time limit ends it."""


def checkpoint_dot_policy(w1, w2, x):
    while True:
        pass
