"""``cupyx`` on the CPU device model: pinned NumPy arrays and the profiler."""
import math

import numpy

from ..cuda.pinned_memory import alloc_pinned_memory
from . import profiler  # noqa: F401


def empty_pinned(shape, dtype=float, order="C"):
    """A NumPy array in pinned (page-locked) host memory, uninitialized."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    nbytes = math.prod(shape) * numpy.dtype(dtype).itemsize
    mem = alloc_pinned_memory(nbytes)
    return numpy.ndarray(shape, dtype=dtype, buffer=mem, order=order)


def zeros_pinned(shape, dtype=float, order="C"):
    """A NumPy array in pinned host memory, filled with zeros."""
    out = empty_pinned(shape, dtype, order)
    numpy.copyto(out, 0, casting="unsafe")
    return out


def _like(a, dtype, order, shape):
    dtype = a.dtype if dtype is None else dtype
    shape = a.shape if shape is None else shape
    if order == "K":
        order = "F" if a.flags.f_contiguous and not a.flags.c_contiguous \
            else "C"
    return shape, dtype, "C" if order == "A" else order


def empty_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    return empty_pinned(*_like(a, dtype, order, shape))


def zeros_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    return zeros_pinned(*_like(a, dtype, order, shape))
