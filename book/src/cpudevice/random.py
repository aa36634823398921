"""``cupy.random`` on the CPU device model.

Numbers are drawn on the worker, asynchronously, from NumPy's PCG64 seeded
per call from the module's seed, so a seeded program gives the same numbers
whatever the streams do. (They are not the numbers CuPy's generators give.)
"""
import numpy

from ._core import _launch, _refuse_in_capture
from ._ndarray import _empty

_seed_seq = [numpy.random.SeedSequence()]


def seed(seed=None):
    _seed_seq[0] = numpy.random.SeedSequence(seed)


def _child():
    return _seed_seq[0].spawn(1)[0]


def _fill(size, dtype, draw, seq=None):
    if seq is None:
        # The module's functions are CuPy's RandomState, which draws with
        # cuRAND's host API: CuPy refuses it on a capturing stream. (A
        # Generator draws with its own kernels, which capture allows.)
        _refuse_in_capture("cuRAND")
    size = () if size is None else size
    out = _empty(size, dtype)
    dst = out._a
    seq = seq or _child()

    def run():
        dst[...] = draw(numpy.random.Generator(numpy.random.PCG64(seq)),
                        dst.shape)
    _launch(run, dst.nbytes)
    return out


def random_sample(size=None, dtype=float):
    return _fill(size, dtype, lambda g, s: g.random(s))


random = random_sample


def rand(*size, dtype=float):
    return random_sample(size, dtype)


def standard_normal(size=None, dtype=float):
    return _fill(size, dtype, lambda g, s: g.standard_normal(s))


def randn(*size, dtype=float):
    return standard_normal(size, dtype)


def normal(loc=0.0, scale=1.0, size=None, dtype=float):
    return _fill(size, dtype, lambda g, s: g.normal(loc, scale, s))


def uniform(low=0.0, high=1.0, size=None, dtype=float):
    return _fill(size, dtype, lambda g, s: g.uniform(low, high, s))


def randint(low, high=None, size=None, dtype="l"):
    if high is None:
        low, high = 0, low
    return _fill(size, dtype, lambda g, s: g.integers(low, high, s))


class Generator:
    """``cupy.random.Generator``: a seeded stream of random numbers."""

    def __init__(self, seed=None):
        self._seq = numpy.random.SeedSequence(seed)

    def _next(self):
        return self._seq.spawn(1)[0]

    def random(self, size=None, dtype=numpy.float64, out=None):
        return _fill(size, dtype, lambda g, s: g.random(s), self._next())

    def standard_normal(self, size=None, dtype=numpy.float64, out=None):
        return _fill(size, dtype, lambda g, s: g.standard_normal(s),
                     self._next())

    def normal(self, loc=0.0, scale=1.0, size=None, dtype=numpy.float64):
        return _fill(size, dtype, lambda g, s: g.normal(loc, scale, s),
                     self._next())

    def uniform(self, low=0.0, high=1.0, size=None, dtype=numpy.float64):
        return _fill(size, dtype, lambda g, s: g.uniform(low, high, s),
                     self._next())

    def integers(self, low, high=None, size=None, dtype=numpy.int64,
                 endpoint=False):
        if high is None:
            low, high = 0, low
        return _fill(size, dtype,
                     lambda g, s: g.integers(low, high, s, endpoint=endpoint),
                     self._next())


def default_rng(seed=None):
    return Generator(seed)
