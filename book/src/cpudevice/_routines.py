"""Elementwise and reduction routines of the CPU device model: ufuncs
queued as one kernel each, reductions (one table, `REDUCTIONS`, makes both
``ndarray``'s methods and the package's functions), ``matmul`` and ``dot``.
"""
import inspect
import math
import os

import numpy
from numpy.lib.array_utils import normalize_axis_tuple

from ._core import (_broadcast_shape, _check_device, _check_host_operand,
                    _check_ufunc_operand, _dtype_cache, _empty, _fusing,
                    _in_fused_body, _launch, _nbytes, _result_dtype)
from ._hardware import api
from ._ndarray import ndarray
from .cuda import runtime
from .cuda.stream import _check_cublas_capture


@api("launch")
def _ufunc(uf, *args, out=None, dtype=None):
    """Queue ``uf(*args)`` elementwise; return the result array(s)."""
    arrays, views = [], []
    for a in args:
        if isinstance(a, ndarray):
            arrays.append(a)
            views.append(a._a)
        else:
            _check_ufunc_operand(a)
            views.append(a)
    _check_device(arrays)
    shape = _broadcast_shape(arrays)
    res_dtype = _result_dtype(uf, args, dtype)
    if uf.nout > 1:
        outs = tuple(_empty(shape, d) for d in res_dtype)
        oviews = tuple(o._a for o in outs)
        _launch(lambda: uf(*views, out=oviews, dtype=dtype),
                _nbytes(arrays) + sum(o.nbytes for o in oviews))
        return outs
    if out is None:
        out = _empty(shape, res_dtype)
    else:
        if not isinstance(out, ndarray):
            raise TypeError("Output arguments must be cupy.ndarray")
        _check_device([out])
        if out.shape != shape:
            raise ValueError(f"Out shape is mismatched: out has shape "
                             f"{out.shape}, the result has shape {shape}")
        if not numpy.can_cast(res_dtype, out.dtype, "same_kind"):
            raise TypeError(
                f"output (typecode '{res_dtype.char}') could not be coerced "
                f"to provided output parameter (typecode '{out.dtype.char}')"
                " according to the casting rule ''same_kind''")
    oview = out._a
    if dtype is None:       # the same call, without parsing ``dtype=None``
        def run():
            uf(*views, out=oview)
    else:
        def run():
            uf(*views, out=oview, dtype=dtype)
    _launch(run, _nbytes(arrays) + oview.nbytes)
    return out


def _make_ufunc(uf):
    def f(*args, out=None, dtype=None):
        if _in_fused_body():
            return uf(*args, out=out, dtype=dtype)
        if len(args) != uf.nin:
            raise TypeError(f"Wrong number of arguments for {uf.__name__}: "
                            f"{len(args)} given, {uf.nin} expected")
        return _ufunc(uf, *args, out=out, dtype=dtype)
    f.__name__ = f.__qualname__ = uf.__name__
    f.__doc__ = f"Elementwise ``{uf.__name__}``, queued on the current stream."
    f.nin, f.nout = uf.nin, uf.nout
    return f


# -- reductions ---------------------------------------------------------------
def _reduced_shape(shape, axis, keepdims):
    if axis is None:                    # every axis (the common case)
        return (1,) * len(shape) if keepdims else ()
    axes = normalize_axis_tuple(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


_NO_DTYPE = {numpy.max, numpy.min, numpy.argmax, numpy.argmin,
             numpy.all, numpy.any}


def _accelerators(text):
    """CuPy's routine accelerators from ``CUPY_ACCELERATORS`` (a comma-
    separated list; cupy/_core/_accelerator.pyx), read once at import, as
    CuPy reads it: ``cub`` when the variable is unset, none when it is
    empty; an unknown name raises ValueError, as it fails CuPy's import."""
    names = [b for b in text.split(",") if b]
    for b in names:
        if b not in ("cub", "cutensor", "cutensornet"):
            raise ValueError(f"Unknown accelerator: {b}")
    return names


ACCELERATORS = _accelerators(os.environ.get("CUPY_ACCELERATORS", "cub"))

# CUB's reductions as CuPy 14 calls them (cupy/cuda/cub.pyx): `sum`,
# `prod`, `max`, `min`, `argmax`, `argmin` (and `mean`, a sum then a
# divide) of a C- or F-contiguous array
# go to cub::DeviceReduce when they reduce every axis, and (but for the arg
# ones) to cub::DeviceSegmentedReduce when they reduce the contiguous axes
# (the last ones in C order, the first in F order); only for these dtypes
# (CUB's sum does not promote, so a sum with dtype None takes only the
# dtypes NumPy sums in their own type).
_CUB_OPS = {numpy.sum, numpy.prod, numpy.max, numpy.min, numpy.argmax,
            numpy.argmin}
_CUB_DTYPES = frozenset(numpy.dtype(c) for c in "bBhHiIlLefdFD")
_CUB_SUM_DTYPES = frozenset(numpy.dtype(c) for c in "lLefdFD")


def _cub_workspace(func, a, axis, dtype):
    """Bytes of workspace that CuPy allocates from the pool for this
    reduction when it goes to CUB (None: it does not). CuPy asks CUB for
    the size and allocates it before the launch, and frees it after (it is
    alive beside the result): 1 byte when CUB needs no scratch (CUB
    reports 1, never 0), which the pool rounds up to a 512-byte block.

    * segmented (an axis reduction): 1 byte;
    * whole array: 1 byte when the array fits one tile of CUB's reduce
      policy (256 threads of up to 16 items, 16 four-byte items each
      scaled by the accumulator's size: 4,096 float32, 2,048 float64),
      else one accumulator per block of its grid (8 blocks of 256 threads
      per multiprocessor, times CUB's subscription factor 5), aligned to
      256 bytes, plus 255 for the alignment.
    The sizes are read from CUB's dispatch (cub/device/dispatch/
    dispatch_reduce.cuh) and NVIDIA's tuning, not measured; a GPU's run
    confirms them (benchmarks/README.md)."""
    if "cub" not in ACCELERATORS:
        return None
    if func is numpy.mean:          # CuPy's mean is CUB's sum, then a divide
        if a.size == 0:
            return None
        if dtype is None and a.dtype.char not in "dD":
            dtype = (numpy.float64 if a.dtype.kind in "iub" else
                     numpy.float32 if a.dtype.char == "e" else None)
        elif dtype is not None and numpy.dtype(dtype).kind in "iub":
            dtype = numpy.float64
        func = numpy.sum
    if func not in _CUB_OPS:
        return None
    src = a._a
    if not (src.flags.c_contiguous or src.flags.f_contiguous) or \
            a.size > 0x7FFFFFFF:
        return None
    if dtype is None and func in (numpy.sum, numpy.prod):
        supported = _CUB_SUM_DTYPES
    elif dtype is None or numpy.dtype(dtype) == a.dtype:
        supported = _CUB_DTYPES
    else:
        return None
    if a.dtype not in supported:
        return None
    axes = tuple(range(a.ndim)) if axis is None else tuple(sorted(
        normalize_axis_tuple(axis, a.ndim)))
    if len(axes) < a.ndim:                      # DeviceSegmentedReduce
        if func in (numpy.argmax, numpy.argmin) or a.size == 0 or not axes:
            return None
        together = axes == tuple(range(axes[0], axes[0] + len(axes)))
        inner = (axes[-1] == a.ndim - 1 if src.flags.c_contiguous
                 else axes[0] == 0)
        return 1 if together and inner else None
    if func in (numpy.argmax, numpy.argmin):    # a key-value pair
        accum = (2 * a.dtype.alignment if a.dtype.kind == "c"
                 else max(4, a.dtype.alignment)) + a.dtype.itemsize
    else:
        accum = a.dtype.itemsize
    tile = 256 * max(1, min(16, 64 // accum))
    if a.size <= tile:
        return 1
    props = runtime.getDeviceProperties(runtime.getDevice())
    blocks = props["maxThreadsPerMultiProcessor"] // 256 \
        * props["multiProcessorCount"] * 5
    return -(-blocks * accum // 256) * 256 + 255


# Reductions with no identity, by the name CuPy's error gives them: a full
# reduction goes to CUB (CuPy's default accelerator), or, with CUB off, to
# CuPy's own reduction kernel, as an axis reduction does.
_NO_IDENTITY = {numpy.max: ("CUPY_CUB_MAX", "cupy_max"),
                numpy.min: ("CUPY_CUB_MIN", "cupy_min"),
                numpy.argmax: ("CUPY_CUB_ARGMAX", "cupy_argmax"),
                numpy.argmin: ("CUPY_CUB_ARGMIN", "cupy_argmin")}


@api("reduction")
def _reduce(func, a, axis=None, dtype=None, out=None, keepdims=False,
            **extra):
    """Queue ``func(a, axis=...)`` as one reduction kernel."""
    if _in_fused_body():
        _fusing.reduced = True
        kw = dict(extra)
        if dtype is not None:
            kw["dtype"] = dtype
        return func(a, axis=axis, keepdims=keepdims, **kw)
    if not isinstance(a, ndarray):
        a = asarray(a)
    _check_device([a])
    kw = dict(extra)
    if func not in _NO_DTYPE:
        kw["dtype"] = dtype
    if func in (numpy.argmax, numpy.argmin) and axis is not None and \
            not isinstance(axis, (int, numpy.integer)):
        raise TypeError("axis must be an integer for argmax/argmin")
    shape = _reduced_shape(a.shape, axis, keepdims)
    if a.size == 0 and func in _NO_IDENTITY and math.prod(shape) != 0:
        full = len(_reduced_shape(a.shape, axis, False)) == 0 and \
            "cub" in ACCELERATORS
        raise ValueError("zero-size array to reduction operation {} which "
                         "has no identity".format(
                             _NO_IDENTITY[func][0 if full else 1]))
    key = (func, a.dtype, dtype, tuple(sorted(extra.items())) if extra else ())
    rdt = _dtype_cache.get(key)
    if rdt is None:
        with numpy.errstate(all="ignore"):
            probe = {k: v for k, v in kw.items() if k != "ddof"}
            rdt = numpy.asarray(func(numpy.ones(2, a.dtype), **probe)).dtype
        _dtype_cache[key] = rdt
    if out is None:
        out = _empty(shape, rdt)
    elif out.shape != shape:
        raise ValueError(f"Out shape is mismatched: {out.shape} != {shape}")
    src, dst = a._a, out._a
    n = a._a.size if axis is None else math.prod(   # elements per reduction
        a.shape[d] for d in normalize_axis_tuple(axis, a.ndim))
    if func in (numpy.argmax, numpy.argmin):
        def run():
            dst[...] = func(src, axis=axis, keepdims=keepdims)
    elif func in (numpy.mean, numpy.var, numpy.std) and \
            n - extra.get("ddof", 0) <= 0:
        def run():          # 0/0 is NaN, x/0 inf: CuPy's result, no warning
            _moments_no_warning(func, src, dst, axis, n,
                                extra.get("ddof", 0), kw.get("dtype"))
    else:
        def run():
            func(src, axis=axis, out=dst, keepdims=keepdims, **kw)
    workspace = _cub_workspace(func, a, axis, dtype)
    if workspace is not None:       # alive until the launch is queued
        workspace = _empty((workspace,), numpy.uint8)
    _launch(run, src.nbytes + dst.nbytes)
    return out


def _reduction(func, dtype=True, ddof=False):
    """CuPy's reduction ``func`` as an `ndarray` method (`as_function` makes
    the ``cupy.<name>`` function of it): one definition for both."""
    if ddof:
        def method(self, axis=None, dtype=None, out=None, ddof=0,
                   keepdims=False):
            return _reduce(func, self, axis, dtype, out, keepdims, ddof=ddof)
    elif dtype:
        def method(self, axis=None, dtype=None, out=None, keepdims=False):
            return _reduce(func, self, axis, dtype, out, keepdims)
    else:
        def method(self, axis=None, out=None, keepdims=False):
            return _reduce(func, self, axis, None, out, keepdims)
    method.__name__ = func.__name__
    method.__qualname__ = f"ndarray.{func.__name__}"
    method.__doc__ = f"``{func.__name__}``, queued as one reduction kernel."
    return method


# The reductions, once: `ndarray`'s methods, and the package's functions.
REDUCTIONS = {m.__name__: m for m in (
    _reduction(numpy.sum), _reduction(numpy.prod), _reduction(numpy.mean),
    _reduction(numpy.var, ddof=True), _reduction(numpy.std, ddof=True),
    *(_reduction(f, dtype=False) for f in (
        numpy.max, numpy.min, numpy.argmax, numpy.argmin, numpy.all,
        numpy.any)))}


def as_function(method):
    """``cupy.<name>(a, ...)`` from the method ``ndarray.<name>(self, ...)``:
    the same parameters, the array first (a host array too: it is copied
    to the device, or used as it is inside a fused body)."""
    def function(a, *args, **kwargs):
        return method(a, *args, **kwargs)
    sig = inspect.signature(method)
    first, *rest = sig.parameters.values()
    function.__signature__ = sig.replace(
        parameters=[first.replace(name="a"), *rest])
    function.__name__ = function.__qualname__ = method.__name__
    function.__doc__ = method.__doc__
    return function


def _moments_no_warning(func, src, dst, axis, n, ddof, dtype):
    """mean/var/std over ``n`` <= ``ddof`` elements: what CuPy's kernels
    compute (a division by zero), where NumPy would also warn."""
    with numpy.errstate(all="ignore"):
        if dtype is None:
            dtype = dst.dtype
        m = numpy.sum(src, axis=axis, keepdims=True, dtype=dtype) / \
            dst.dtype.type(n)
        if func is not numpy.mean:
            d = numpy.abs(src - m) ** 2
            m = numpy.sum(d, axis=axis, keepdims=True, dtype=dtype) / \
                dst.dtype.type(max(n - ddof, 0))
            if func is numpy.std:
                m = numpy.sqrt(m)
        dst[...] = m.reshape(dst.shape)


def _matmul_shape(a, b, name):
    sa, sb = a.shape, b.shape
    if not sa or not sb:
        raise ValueError(f"{name}: operands must not be 0-dimensional")
    ka = sa[-1]
    kb = sb[-2] if len(sb) > 1 else sb[0]
    if ka != kb:
        raise ValueError(f"{name}: shapes {sa} and {sb} not aligned: "
                         f"{ka} (dim {len(sa) - 1}) != {kb}")
    head_a = sa[:-1]
    tail_b = sb[-1:] if len(sb) > 1 else ()
    if name == "dot" or (len(sa) <= 2 and len(sb) <= 2):
        return head_a + (sb[:-2] if len(sb) > 2 else ()) + tail_b
    batch = numpy.broadcast_shapes(sa[:-2], sb[:-2])
    return batch + sa[-2:-1] + tail_b


def _product(func, name, a, b, out=None):
    _check_host_operand(a)
    _check_host_operand(b)
    a, b = asarray(a), asarray(b)
    _check_device([a, b])
    shape = _matmul_shape(a, b, name)
    dt = numpy.result_type(a.dtype, b.dtype)
    _check_cublas_capture(dt)
    if out is None:
        out = _empty(shape, dt)
    av, bv, ov = a._a, b._a, out._a
    k = av.shape[-1]
    _launch(lambda: func(av, bv, out=ov), av.nbytes + bv.nbytes + ov.nbytes,
            2 * k * ov.size)
    return out


@api("launch")
def matmul(a, b, out=None):
    """Matrix product, queued as one kernel."""
    return _product(numpy.matmul, "matmul", a, b, out)


@api("launch")
def dot(a, b, out=None):
    """Dot product, queued as one kernel."""
    return _product(numpy.dot, "dot", a, b, out)


# Below: _creation builds on this module.
from ._creation import asarray, full  # noqa: E402
