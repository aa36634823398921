"""src.costmodel: d2l's cost model of waiting, fitted without SciPy."""
from itertools import product

import numpy as np
import pytest

from src import costmodel

COUNTS = [1250, 2500, 5000, 10000]


def brute_nnls(A, b, step=0.05, top=3.0):
    """The smallest residual over a grid of non-negative x (a check)."""
    grid = np.arange(0, top + step, step)
    return min(float(np.sum((A @ np.array(x) - b) ** 2))
               for x in product(grid, repeat=A.shape[1]))


def test_nnls_solves_an_unconstrained_problem_exactly():
    A = np.array([[1.0, 0], [0, 1], [1, 1]])
    x = np.array([2.0, 0.5])
    assert np.allclose(costmodel.nnls(A, A @ x), x)


def test_nnls_holds_a_term_at_zero_where_least_squares_goes_negative():
    A = np.array([[1.0, 1], [1, 2], [1, 3]])
    b = np.array([3.0, 2.0, 1.0])          # falling: the slope would be < 0
    free, *_ = np.linalg.lstsq(A, b, rcond=None)
    assert free[1] < 0
    x = costmodel.nnls(A, b)
    assert (x >= 0).all() and x[1] == 0 and x[0] == pytest.approx(2.0)
    err = float(np.sum((A @ x - b) ** 2))
    assert err <= brute_nnls(A, b) + 1e-9


def test_fit_recovers_the_terms_of_times_the_model_made():
    t1, t2, t3 = 8e-6, 20e-6, 30e-6
    q, w = costmodel.predict(COUNTS, t1, t2, t3)
    fitted = costmodel.fit(COUNTS, q, w, t1)
    assert np.allclose(fitted, (t1, t2, t3), rtol=1e-6)
    mq, mw = costmodel.misses(COUNTS, q, w, *fitted)
    assert np.allclose(mq, 0, atol=1e-6) and np.allclose(mw, 0, atol=1e-6)


def test_fit_keeps_every_term_non_negative_and_misses_say_by_how_much():
    # The queued loop slower per operation than the waiting one: no exact
    # non-negative fit exists, and the misses measure how far it is off.
    t_queue = [0.030, 0.060, 0.120, 0.240]
    t_wait = [0.025, 0.050, 0.100, 0.200]
    t1, t2, t3 = costmodel.fit(COUNTS, t_queue, t_wait, 5e-6)
    assert min(t1, t2, t3) >= 0
    mq, mw = costmodel.misses(COUNTS, t_queue, t_wait, t1, t2, t3)
    q, w = costmodel.predict(COUNTS, t1, t2, t3)
    assert np.allclose(mq, q / np.array(t_queue) - 1)
    assert np.allclose(mw, w / np.array(t_wait) - 1)
    assert np.abs(np.concatenate([mq, mw])).max() > 0.01
