"""Creation routines of the CPU device model (``cupy.empty``, ``zeros``,
``full``, the ``_like`` forms, ``arange``, ``linspace``, ``array``,
``asarray``, ...) and ``asnumpy``.
"""
import math

import numpy

from .cuda import runtime
from ._hardware import api
from .cuda.stream import _queue_of
from ._core import _launch, _normalize_shape
from ._ndarray import _empty, ndarray
from ._copies import _h2d
from ._cai import as_cupy_like


# -- creation -----------------------------------------------------------------


@api("call")
def empty(shape, dtype=float, order="C"):
    return _empty(_normalize_shape(shape), dtype, order)


@api("launch")
def full(shape, fill_value, dtype=None, order="C"):
    shape = _normalize_shape(shape)
    if dtype is None:
        dtype = numpy.asarray(fill_value).dtype
    out = _empty(shape, dtype, order)
    out.fill(fill_value)
    return out


@api("launch")
def zeros(shape, dtype=float, order="C"):
    return full(shape, 0, dtype, order)


@api("launch")
def ones(shape, dtype=float, order="C"):
    return full(shape, 1, dtype, order)


def _like(a, dtype, shape):
    return (a.dtype if dtype is None else dtype,
            a.shape if shape is None else shape)


@api("call")
def empty_like(prototype, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(prototype, dtype, shape)
    return empty(shape, dtype)


@api("launch")
def zeros_like(a, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(a, dtype, shape)
    return zeros(shape, dtype)


@api("launch")
def ones_like(a, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(a, dtype, shape)
    return ones(shape, dtype)


@api("launch")
def full_like(a, fill_value, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(a, dtype, shape)
    return full(shape, fill_value, dtype)


@api("launch")
def arange(start, stop=None, step=1, dtype=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = numpy.result_type(start, stop, step)
    n = max(0, math.ceil((stop - start) / step))
    out = _empty((n,), dtype)
    dst = out._a
    _launch(lambda: numpy.copyto(dst, numpy.arange(start, stop, step, dtype)[
        :n], casting="unsafe"), dst.nbytes)
    return out


@api("launch")
def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None,
             axis=0):
    if num < 0:
        raise ValueError("linspace with num<0 is not supported")
    if dtype is None:
        dtype = numpy.float64
    out = _empty((num,), dtype)
    dst = out._a
    _launch(lambda: numpy.copyto(dst, numpy.linspace(
        start, stop, num, endpoint, dtype=numpy.float64), casting="unsafe"),
        dst.nbytes)
    if retstep:
        div = (num - 1) if endpoint else num
        return out, (stop - start) / div if div > 0 else numpy.nan
    return out


@api("copy")
def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *,
          blocking=False):
    """A device array of ``obj``: a copy unless ``copy`` is false and ``obj``
    is a device array already. An object with ``__cuda_array_interface__``
    (or ``__cupy_get_ndarray__``) is first viewed as one (zero copy, after
    its stream has been synchronized: `_cai`)."""
    if not isinstance(obj, (ndarray, numpy.ndarray)):
        converted = as_cupy_like(obj)
        if converted is not None:
            obj = converted
    if isinstance(obj, ndarray):
        if obj.device.id != runtime.getDevice():
            obj = obj.get()
        else:       # as CuPy: ndmin gives a view, never reshapes ``obj``
            a = obj
            if copy or not (dtype is None or numpy.dtype(dtype) == obj.dtype):
                a = obj.astype(obj.dtype if dtype is None else dtype)
            if ndmin > a.ndim:
                a = a.reshape((1,) * (ndmin - a.ndim) + a.shape)
            return a
    if isinstance(obj, (list, tuple)):      # a sequence of device arrays
        obj = [o.get() if isinstance(o, ndarray) else o for o in obj]
    host = numpy.asarray(obj, dtype=dtype)
    if ndmin > host.ndim:
        host = host.reshape((1,) * (ndmin - host.ndim) + host.shape)
    out = _empty(host.shape, host.dtype, "F" if order == "F" else "C")
    # CuPy stages the data in pinned memory and copies it asynchronously;
    # when it then waits for the copy, that is the driver's synchronous path
    item = _h2d(out._a, host, sync=blocking)
    if blocking:
        _queue_of(None).host_wait(item)
    return out


@api("copy")
def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    """``a`` as a device array on the current device (``a`` itself if it is
    one already, a view of another library's device memory if ``a`` has
    ``__cuda_array_interface__``); from the host, a copy on the current
    stream."""
    return array(a, dtype, copy=bool(copy), order=order or "K",
                 blocking=blocking)


@api("copy")
def ascontiguousarray(a, dtype=None):
    a = asarray(a, dtype)
    return a if a.flags.c_contiguous else a.copy()


@api("copy")
def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    """``a`` as a NumPy array on the host (waits for it by default)."""
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out, blocking=blocking)
    a = numpy.asarray(a, order=order)
    if out is None:
        return a
    out[...] = a
    return out


def get_array_module(*args):
    import sys
    if any(isinstance(a, ndarray) for a in args):
        return sys.modules[__package__]
    return numpy
