"""d2l's cost model of waiting, fitted to measured times (chapter 4).

The host takes ``t1`` to queue an operation, the device ``t2`` to run it,
and ``t3`` passes before a waiting host learns that it is done; then ``n``
operations cost ``t1 + n t2 + t3`` when the host queues them all and waits
once, and ``n (t1 + t2 + t3)`` when it waits after each. `fit` finds the
three terms from both loops' times and the host's time to queue one
operation, with every term zero or more; `predict` gives the model's
times and `misses` how far they lie from the measured ones.
"""
from itertools import combinations

import numpy as np


def nnls(A, b):
    """Least squares ``A x ~ b`` with every ``x >= 0`` (non-negative least
    squares), by brute force: fit each subset of the columns with the other
    terms held at zero, keep the best fit with no negative term. Exact, and
    quick for the few columns of a cost model (SciPy's ``nnls`` without
    SciPy)."""
    A, b = np.asarray(A, dtype=float), np.asarray(b, dtype=float)
    best, best_err = np.zeros(A.shape[1]), float(b @ b)
    for k in range(1, A.shape[1] + 1):
        for cols in combinations(range(A.shape[1]), k):
            sol, *_ = np.linalg.lstsq(A[:, cols], b, rcond=None)
            if (sol >= 0).all():
                x = np.zeros(A.shape[1])
                x[list(cols)] = sol
                err = float((A @ x - b) @ (A @ x - b))
                if err < best_err:
                    best, best_err = x, err
    return best


def predict(counts, t1, t2, t3):
    """The model's seconds for ``counts`` operations: ``(queue all and wait
    once, wait after each)``, two arrays."""
    n = np.asarray(counts, dtype=float)
    return t1 + n * t2 + t3, n * (t1 + t2 + t3)


def fit(counts, t_queue, t_wait, t1_host):
    """``(t1, t2, t3)``, in seconds, each zero or more, that best explain
    the times of the loop that queues ``counts`` operations and waits once
    (``t_queue``), of the loop that waits after each (``t_wait``), and the
    host's measured time to queue one operation (``t1_host``, e.g. the
    median of ``cpx.profiler.benchmark``'s ``cpu_times``). Each time is
    weighted by its own size, so that short runs count as much as long
    ones: the fit minimizes relative errors."""
    n = np.asarray(counts, dtype=float)
    one = np.ones_like(n)
    A = np.vstack([np.column_stack([one, n, one]),     # queue all, wait once
                   np.column_stack([n, n, n]),         # wait after each
                   [[1.0, 0.0, 0.0]]])                 # the host's queueing
    T = np.concatenate([np.asarray(t_queue, dtype=float),
                        np.asarray(t_wait, dtype=float), [float(t1_host)]])
    w = 1 / T
    return tuple(float(t) for t in nnls(A * w[:, None], T * w))


def misses(counts, t_queue, t_wait, t1, t2, t3):
    """How far the model lies from each measured time, as a fraction of it
    (``model / measured - 1``: 0.2 is 20% above): ``(queue all, wait after
    each)``, two arrays, one value per count."""
    q, w = predict(counts, t1, t2, t3)
    return (q / np.asarray(t_queue, dtype=float) - 1,
            w / np.asarray(t_wait, dtype=float) - 1)
