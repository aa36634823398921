"""The CPU device model: the part of CuPy's API the book uses, run on the CPU.

Same names, signatures, exceptions and semantics as CuPy, with the work done
for real: arrays live in a memory pool of real buffers, operations are queued
on streams run by worker threads, copies go through copy engines, and pinned
host memory is page-locked. Its rules (the layers, the engines and the
device clock, the locks and why, what is modelled and what is real) are in
README.md beside this file.
Imported as ``cp`` by ``from src import cp`` when no GPU is usable.
"""
import numpy as _np

from . import _core, _ndarray, _routines, cuda, random  # noqa: F401
from . import cupyx  # noqa: F401
from ._ndarray import ndarray
from ._creation import (asarray, asnumpy, array, ascontiguousarray,  # noqa
                        empty, zeros, ones, full, empty_like, zeros_like,
                        ones_like, full_like, arange, linspace,
                        get_array_module)
from ._dlpack import from_dlpack, fromDlpack  # noqa: F401
from ._routines import dot, matmul, _make_ufunc  # noqa: F401
from . import _util  # noqa: F401  (CuPy's settings from the environment)
from ._core import _in_fused_body
from ._kernel import ElementwiseKernel, ReductionKernel, RawKernel, fuse  # noqa
from .cuda.memory import get_default_memory_pool  # noqa: F401
from .cuda.pinned_memory import get_default_pinned_memory_pool  # noqa: F401

__version__ = "14.2.0+cpudevice"

# dtypes and constants, as CuPy re-exports them from NumPy
from numpy import (bool_, int8, int16, int32, int64, uint8, uint16,  # noqa
                   uint32, uint64, float16, float32, float64, complex64,
                   complex128, dtype, newaxis, pi, e, inf, nan)
from numpy.exceptions import VisibleDeprecationWarning  # noqa: F401

for _name in ["add", "subtract", "multiply", "divide", "true_divide",
              "floor_divide", "power", "remainder", "mod", "negative",
              "absolute", "sqrt", "square", "exp", "log", "log2", "log10",
              "sin", "cos", "tan", "tanh", "arctan2", "maximum", "minimum",
              "fmax", "fmin", "abs", "sign", "floor", "ceil", "rint",
              "isnan", "isinf", "isfinite", "less", "less_equal", "greater",
              "greater_equal", "equal", "not_equal", "logical_and",
              "logical_or", "logical_not", "hypot", "reciprocal", "cbrt",
              "expm1", "log1p", "sinh", "cosh", "arcsin", "arccos",
              "arctan"]:
    globals()[_name] = _make_ufunc(getattr(_np, _name))


def is_available():
    """True: the model always has its virtual devices."""
    return cuda.runtime.getDeviceCount() > 0


for _name, _method in _routines.REDUCTIONS.items():
    globals()[_name] = _routines.as_function(_method)
amax, amin = max, min       # noqa: F821  (made just above)


def where(condition, x=None, y=None):
    """Elementwise choice, queued as one kernel."""
    if x is None or y is None:
        raise NotImplementedError("the CPU device model supports "
                                  "where(condition, x, y) only")
    if _in_fused_body():
        return _np.where(condition, x, y)
    for a in (condition, x, y):
        if not isinstance(a, ndarray):
            _core._check_ufunc_operand(a)
    args = [asarray(a) if isinstance(a, _np.ndarray) else a
            for a in (condition, x, y)]
    arrays = [a for a in args if isinstance(a, ndarray)]
    _core._check_device(arrays)
    shape = _core._broadcast_shape(arrays)
    dt = _np.result_type(*[a.dtype if isinstance(a, ndarray) else a
                           for a in args[1:]])
    return _ndarray._queue_into(shape, dt, _np.where, args)


def allclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    """0-d boolean device array: are ``a`` and ``b`` close everywhere?"""
    close = isclose(a, b, rtol, atol, equal_nan)
    return all(close)


def isclose(a, b, rtol=1.e-5, atol=1.e-8, equal_nan=False):
    diff = absolute(subtract(a, b))
    tol = add(atol, multiply(rtol, absolute(b)))
    out = less_equal(diff, tol)
    if equal_nan:
        out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


def array_equal(a1, a2, equal_nan=False):
    """0-d boolean device array: same shape and elements (with
    ``equal_nan``, NaNs in the same places count as equal, as CuPy's)."""
    if a1.shape != a2.shape:
        return zeros((), bool_)
    same = equal(a1, a2)
    if equal_nan:
        same = logical_or(same, logical_and(isnan(a1), isnan(a2)))
    return all(same)


def clip(a, a_min, a_max, out=None):
    return minimum(maximum(a, a_min), a_max, out=out)
