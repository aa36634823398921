"""Elementwise and reduction routines of the CPU device model: ufuncs
queued as one kernel each, reductions (one table, `REDUCTIONS`, makes both
``ndarray``'s methods and the package's functions), ``matmul`` and ``dot``.
They are also ``ndarray``'s operators and methods (``x + y``, ``x @ y``,
``x.sum()``): this module, above `_ndarray`, adds them to the class.
"""
import inspect
import math

import numpy
from numpy.lib.array_utils import normalize_axis_tuple

from ._core import (_broadcast_shape, _check_cublas_capture, _check_device,
                    _check_host_operand, _check_ufunc_operand, _fusing,
                    _in_fused_body, _launch)
from ._hardware import api
from . import _cub
from ._ndarray import _empty, _migration, _nbytes, ndarray
from ._creation import asarray


# -- elementwise ufuncs -------------------------------------------------------
_dtype_cache = {}


def _stand_ins(args, kind):
    """``args`` with each device array replaced by NumPy zeros of its dtype,
    to learn what a computation returns (its dtype, its shape) without
    touching device memory: ``"scalar"``, 0-d; ``"element"``, one element
    per array, of its number of dimensions; ``"full"``, read-only
    zero-stride views of the real shapes."""
    if kind == "scalar":
        make = lambda a: numpy.zeros((), a.dtype)                # noqa: E731
    elif kind == "element":
        make = lambda a: numpy.zeros((1,) * max(a.ndim, 1), a.dtype)  # noqa
    else:
        make = lambda a: numpy.broadcast_to(                     # noqa: E731
            numpy.zeros((), a.dtype), a.shape)
    return [make(a) if isinstance(a, ndarray) else a for a in args]


def _result_dtype(uf, args, dtype):
    key = (uf, dtype, *[a._a.dtype if isinstance(a, ndarray) else type(a)
                        for a in args])
    res = _dtype_cache.get(key)
    if res is None:
        with numpy.errstate(all="ignore"):
            res = uf(*_stand_ins(args, "scalar"), dtype=dtype)
        res = (tuple(r.dtype for r in res) if isinstance(res, tuple)
               else numpy.asarray(res).dtype)
        _dtype_cache[key] = res
    return res


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
    _launch(run, _nbytes(arrays) + oview.nbytes,
            migrate=_migration(arrays + [out]))
    return out


def _make_ufunc(uf):
    # The whole function is the API call, so that its checks are issued at
    # CuPy's pace too (the profile's launch cost is CuPy's whole `x + x`):
    # `_ufunc` inside it adds nothing.
    @api("launch")
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
            "cub" in _cub.ACCELERATORS
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
    workspace = _cub._cub_workspace(func, a, axis, dtype)
    if workspace is not None:       # alive until the launch is queued
        workspace = _empty((workspace,), numpy.uint8)
    _launch(run, src.nbytes + dst.nbytes, migrate=_migration((a, out)))
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


# -- ndarray's operators and methods, which are these routines ----------------
class _Methods:
    """``ndarray``'s methods that are routines, added to it below."""

    def dot(self, b, out=None):
        return dot(self, b, out)

    def __matmul__(self, other):
        return matmul(self, other)

    def __rmatmul__(self, other):
        return matmul(other, self)

    def __array_ufunc__(self, uf, method, *inputs, **kwargs):
        if method != "__call__":
            return NotImplemented
        out = kwargs.pop("out", None)
        if isinstance(out, tuple):
            out = out[0] if len(out) == 1 else out
        return _ufunc(uf, *inputs, out=out, **kwargs)

    def __neg__(self):
        return _ufunc(numpy.negative, self)

    def __abs__(self):
        return _ufunc(numpy.absolute, self)

    def __invert__(self):
        return _ufunc(numpy.invert, self)


_METHODS = {n: m for n, m in vars(_Methods).items() if inspect.isfunction(m)}
for _name, _method in [*_METHODS.items(), *REDUCTIONS.items()]:
    _method.__qualname__ = f"ndarray.{_name}"
    setattr(ndarray, _name, _method)


def _binary(uf):
    def op(self, other):
        return _ufunc(uf, self, other)

    def rop(self, other):
        return _ufunc(uf, other, self)

    def iop(self, other):
        return _ufunc(uf, self, other, out=self)
    return op, rop, iop


for _name, _uf in [("add", numpy.add), ("sub", numpy.subtract),
                   ("mul", numpy.multiply), ("truediv", numpy.true_divide),
                   ("floordiv", numpy.floor_divide), ("mod", numpy.remainder),
                   ("pow", numpy.power), ("and", numpy.bitwise_and),
                   ("or", numpy.bitwise_or), ("xor", numpy.bitwise_xor),
                   ("lshift", numpy.left_shift),
                   ("rshift", numpy.right_shift)]:
    _op, _rop, _iop = _binary(_uf)
    setattr(ndarray, f"__{_name}__", _op)
    setattr(ndarray, f"__r{_name}__", _rop)
    setattr(ndarray, f"__i{_name}__", _iop)

for _name, _uf in [("lt", numpy.less), ("le", numpy.less_equal),
                   ("gt", numpy.greater), ("ge", numpy.greater_equal),
                   ("eq", numpy.equal), ("ne", numpy.not_equal)]:
    setattr(ndarray, f"__{_name}__", _binary(_uf)[0])
ndarray.__hash__ = None
