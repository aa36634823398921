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


def empty_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    """A pinned NumPy array shaped like ``a`` (a NumPy or device array),
    uninitialized. ``order`` 'K' keeps ``a``'s layout (its axis order, as
    NumPy's ``empty_like`` computes it), 'A' is 'F' for a Fortran-ordered
    ``a``; ``subok`` is not supported, as in cupyx."""
    if subok is not None:
        raise TypeError("subok is not supported yet")
    if dtype is None:
        dtype = a.dtype
    if shape is None:
        shape = a.shape
    elif isinstance(shape, (int, numpy.integer)):
        shape = (int(shape),)
    else:
        shape = tuple(shape)
    order = order.upper()
    if order not in ("C", "F", "K", "A"):
        raise ValueError("order not understood: {}".format(order))
    host = getattr(a, "_a", a)        # a device array's layout, on the host
    if not isinstance(host, numpy.ndarray):
        host = numpy.asarray(host)
    # NumPy's own rule (PyArray_NewLikeArray) gives the layout; the empty
    # array it makes is never touched, so it costs no memory.
    like = numpy.empty_like(host, dtype=dtype, order=order, shape=shape)
    nbytes = like.size * like.itemsize
    mem = alloc_pinned_memory(nbytes)
    return numpy.ndarray(shape, dtype=dtype, buffer=mem,
                         strides=like.strides if like.size else None)


def zeros_like_pinned(a, dtype=None, order="K", subok=None, shape=None):
    """A pinned NumPy array shaped like ``a``, filled with zeros."""
    out = empty_like_pinned(a, dtype, order, subok, shape)
    numpy.copyto(out, 0, casting="unsafe")
    return out
