"""The device ndarray of the CPU device model (``cupy.ndarray``).

An array is a NumPy view of a pool block plus the block's pointer. Every
operation that touches data is queued on the current stream and returns at
once, with its result allocated from the pool at the call; shapes, dtypes
and argument errors are checked at the call, as CuPy checks them. The host
waits only where CuPy waits: ``get``, ``asnumpy``, ``print``, ``float``,
``int``, ``bool``, ``item``. As in CuPy, ``numpy.asarray(x)`` raises
``TypeError``: a copy to the host is always explicit.
"""
import inspect
import math
import operator
import threading

import numpy
from numpy.lib.array_utils import normalize_axis_tuple

from . import _hardware
from .cuda import runtime
from .cuda.device import Device
from .cuda.memory import get_default_memory_pool
from .cuda.pinned_memory import _pinned_range
from .cuda.stream import _queue_of

_pool = get_default_memory_pool()


# -- queueing -----------------------------------------------------------------
_fusing = threading.local()     # set while a cupy.fuse body runs on a worker


def _in_fused_body():
    return getattr(_fusing, "on", False)


def _launch(fn, nbytes=0, flops=0, *, stream=None, name=None, items=0,
            steps=1, real=False):
    """Queue ``fn`` on the compute engine of ``stream`` (None: the current
    one), as a kernel that moves ``nbytes`` bytes and does ``flops``
    operations over ``items`` elements; its device time is the profile's
    cost. The first launch of kernel ``name`` on a device loads its module
    (the host waits). ``real=True`` (a twin registered with
    ``real_time=True``: work that waits on the host) makes it also take as
    long as it really runs."""
    q = _queue_of(stream)
    if name is not None and q.capture is None:
        q.dev.load_module(name)
    q.submit(fn, q.dev.compute,
             cost=_hardware.profile.kernel_cost(nbytes, flops, items, name,
                                                steps),
             real=real)


def _nbytes(args):
    """Bytes a kernel reads from the device arrays among ``args``."""
    return sum(a._a.nbytes for a in args if isinstance(a, ndarray))


def _queue_into(shape, dtype, fn, args):
    """Allocate ``out`` now and queue ``out[...] = fn(*args)``, device arrays
    in ``args`` read as their data when the work runs; return ``out``."""
    out = _empty(shape, dtype)
    views = [a._a if isinstance(a, ndarray) else a for a in args]
    dst = out._a

    def run():
        dst[...] = fn(*views)
    _launch(run, _nbytes(args) + dst.nbytes)
    return out


def _check_device(arrays):
    dev = runtime._tls.device
    for a in arrays:
        if a.data.device_id != dev:
            raise ValueError(
                f"The device where the array resides ({a.data.device_id}) "
                f"is different from the current device ({dev}). Peer access "
                "is unavailable between these devices. Copy the array with "
                "cp.asarray(x) inside `with cp.cuda.Device(...)` first.")


def _empty(shape, dtype, order="C"):
    dtype = numpy.dtype(dtype)
    if type(shape) is not tuple:
        shape = _normalize_shape(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    memptr = _pool.malloc(nbytes)
    buf = memptr._buffer if nbytes else numpy.empty(0, numpy.uint8)
    view = numpy.ndarray(shape, dtype, buffer=buf,
                         order="F" if order == "F" else "C")
    return ndarray._wrap(view, memptr)


def _normalize_shape(shape):
    if isinstance(shape, (int, numpy.integer)):
        shape = (shape,)
    shape = tuple(operator.index(s) for s in shape)
    for s in shape:
        if s < 0:
            raise ValueError("negative dimensions are not allowed")
    return shape


def _broadcast_shape(arrays):
    shapes = [a.shape for a in arrays]
    if len(shapes) == 1 or all(s == shapes[0] for s in shapes):
        return shapes[0]
    try:
        return numpy.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError("operands could not be broadcast together with "
                         "shapes " + " ".join(str(s) for s in shapes) +
                         ": each axis must match or be 1 (reshape an "
                         "operand, or add an axis with x[:, None])") \
            from None


# -- elementwise ufuncs ---------------------------------------------------------
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
    key = (uf, dtype) + tuple(a.dtype if isinstance(a, ndarray) else type(a)
                              for a in args)
    res = _dtype_cache.get(key)
    if res is None:
        with numpy.errstate(all="ignore"):
            res = uf(*_stand_ins(args, "scalar"), dtype=dtype)
        res = (tuple(r.dtype for r in res) if isinstance(res, tuple)
               else numpy.asarray(res).dtype)
        _dtype_cache[key] = res
    return res


def _check_host_operand(x):
    if isinstance(x, numpy.ndarray) and x.ndim > 0:
        raise TypeError(
            f"Unsupported type {type(x)}: a NumPy array lives on the host; "
            "copy it to the device with cp.asarray() first")


_SCALARS = (bool, int, float, complex, numpy.generic)


def _check_ufunc_operand(x):
    """A ufunc takes device arrays and scalars; anything else (a list, a
    tuple, None) is refused as CuPy refuses it: ``Unsupported type``."""
    if isinstance(x, _SCALARS):
        return
    if isinstance(x, numpy.ndarray):
        _check_host_operand(x)
        return
    raise TypeError(f"Unsupported type {type(x)}")


def _ufunc(uf, *args, out=None, dtype=None):
    """Queue ``uf(*args)`` elementwise; return the result array(s)."""
    arrays = []
    for a in args:
        if isinstance(a, ndarray):
            arrays.append(a)
        else:
            _check_ufunc_operand(a)
    _check_device(arrays)
    shape = _broadcast_shape(arrays)
    res_dtype = _result_dtype(uf, args, dtype)
    views = [a._a if isinstance(a, ndarray) else a for a in args]
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
    _launch(lambda: uf(*views, out=oview, dtype=dtype),
            _nbytes(arrays) + oview.nbytes)
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


# -- reductions -----------------------------------------------------------------
def _reduced_shape(shape, axis, keepdims):
    if axis is None:
        axes = tuple(range(len(shape)))
    else:
        axes = normalize_axis_tuple(axis, len(shape))
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


_NO_DTYPE = {numpy.max, numpy.min, numpy.argmax, numpy.argmin,
             numpy.all, numpy.any}
# Reductions with no identity, by the name CuPy's error gives them: a full
# reduction goes to CUB (CuPy's default accelerator), an axis reduction to
# CuPy's own reduction kernel.
_NO_IDENTITY = {numpy.max: ("CUPY_CUB_MAX", "cupy_max"),
                numpy.min: ("CUPY_CUB_MIN", "cupy_min"),
                numpy.argmax: ("CUPY_CUB_ARGMAX", "cupy_argmax"),
                numpy.argmin: ("CUPY_CUB_ARGMIN", "cupy_argmin")}


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
        full = len(_reduced_shape(a.shape, axis, False)) == 0
        raise ValueError("zero-size array to reduction operation {} which "
                         "has no identity".format(
                             _NO_IDENTITY[func][0 if full else 1]))
    key = (func, a.dtype, dtype, tuple(sorted(extra.items())))
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
    n = math.prod(a.shape[d] for d in (       # elements per reduction
        range(a.ndim) if axis is None else normalize_axis_tuple(axis,
                                                                a.ndim)))
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
    if out is None:
        out = _empty(shape, dt)
    av, bv, ov = a._a, b._a, out._a
    k = av.shape[-1]
    _launch(lambda: func(av, bv, out=ov), av.nbytes + bv.nbytes + ov.nbytes,
            2 * k * ov.size)
    return out


def matmul(a, b, out=None):
    """Matrix product, queued as one kernel."""
    return _product(numpy.matmul, "matmul", a, b, out)


def dot(a, b, out=None):
    """Dot product, queued as one kernel."""
    return _product(numpy.dot, "dot", a, b, out)


# -- host <-> device copies -----------------------------------------------------
class _Staging:
    """The driver's bounce buffers for copies from and to pageable memory.

    Host threads (uploads) and stream workers (downloads) take and give
    buffers at once: the free list is guarded by a lock, or two threads
    could find the same buffer and one pop another's."""

    def __init__(self):
        self.free = []
        self.lock = threading.Lock()

    def take(self, nbytes):
        with self.lock:
            for i, buf in enumerate(self.free):
                if buf.nbytes >= nbytes:
                    return self.free.pop(i)
        return numpy.empty(max(nbytes, 1 << 20), numpy.uint8)

    def give(self, buf):
        with self.lock:
            self.free.append(buf)
            self.free.sort(key=lambda b: b.nbytes)
            del self.free[4:]


_staging = _Staging()


def _as_bytes_view(buf, like):
    return buf[:like.nbytes].view(like.dtype).reshape(like.shape)


def _stage(nbytes, t0):
    """The host has staged ``nbytes`` of pageable memory since ``t0``: it
    is held at least as long as the profile says staging takes."""
    _hardware.sleep_until(t0 + _hardware.profile.stage_cost(nbytes))


def _h2d(dst, src, stream=None, sync=True):
    """Copy host array ``src`` into device view ``dst`` on ``stream``.

    From pinned memory: one asynchronous copy on the H2D engine. From
    pageable memory: the host first copies ``src`` into a bounce buffer
    (the call blocks for that), then the engine copies the bounce buffer;
    with ``sync`` (cudaMemcpyAsync from pageable memory, as ``set`` does)
    the call returns only when the copy is done, as on a GPU. Without it
    (CuPy's own staging in pinned memory, as ``asarray`` does) the call
    returns once the data is staged. Returns the copy's queue item.
    """
    q = _queue_of(stream)
    if q.capture is not None:
        raise RuntimeError("the current stream is capturing, so H2D "
                           "transfers are disallowed")
    cost = _hardware.profile.copy_cost(src.nbytes, "H2D")
    if _pinned_range(src.ctypes.data, src.nbytes):
        return q.submit(lambda: numpy.copyto(dst, src), q.dev.h2d,
                        cost=cost)
    t0 = _hardware.clock()
    if sync:
        # The host is held until the copy is done, so ``src`` cannot change
        # meanwhile: one real copy stands for the staging and the DMA,
        # while the device clock counts both, one after the other.
        staged = t0 + _hardware.profile.stage_cost(src.nbytes)
        item = q.submit(lambda: numpy.copyto(dst, src), q.dev.h2d,
                        cost=cost, issued=staged)
        q.host_wait(item)
        return item
    buf = _staging.take(src.nbytes)
    stage = _as_bytes_view(buf, src)
    numpy.copyto(stage, src)
    _stage(src.nbytes, t0)

    def copy():
        numpy.copyto(dst, stage)
        _staging.give(buf)
    return q.submit(copy, q.dev.h2d, cost=cost)


def _d2h(out, src, stream=None, blocking=True):
    """Copy device view ``src`` into host array ``out`` on ``stream``.

    Into pinned memory the copy may stay asynchronous (``blocking=False``);
    into pageable memory it goes through a bounce buffer and the call
    returns only when the data has arrived, as cudaMemcpyAsync does.
    """
    q = _queue_of(stream)
    if q.capture is not None:
        raise RuntimeError("the current stream is capturing, so D2H "
                           "transfers are disallowed")
    cost = _hardware.profile.copy_cost(out.nbytes, "D2H")
    if _pinned_range(out.ctypes.data, out.nbytes):
        item = q.submit(lambda: numpy.copyto(out, src), q.dev.d2h,
                        cost=cost)
        if blocking:
            q.host_wait(item)
        return out
    buf = _staging.take(out.nbytes)
    stage = _as_bytes_view(buf, out)
    q.host_wait(q.submit(lambda: numpy.copyto(stage, src), q.dev.d2h,
                         cost=cost))
    t0 = _hardware.clock()
    numpy.copyto(out, stage)
    _staging.give(buf)
    _stage(out.nbytes, t0)
    return out


# -- the array --------------------------------------------------------------------
class ndarray:
    """Multi-dimensional array on a (virtual) device."""

    __slots__ = ("_a", "data", "_base", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None,
                 order="C"):
        shape = _normalize_shape(shape)
        dtype = numpy.dtype(dtype)
        self._base = None
        if memptr is None:
            tmp = _empty(shape, dtype, order)
            self._a, self.data = tmp._a, tmp.data
            return
        buf = memptr._buffer
        self._a = numpy.ndarray(shape, dtype, buffer=buf, strides=strides,
                                order=order)
        self.data = memptr

    @classmethod
    def _wrap(cls, view, memptr, base=None):
        a = cls.__new__(cls)
        a._a = view
        a.data = memptr
        a._base = base
        return a

    # -- metadata (no waiting) --
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)

    @shape.setter
    def shape(self, value):
        self._a = self._a.reshape(value, copy=False)

    @property
    def device(self):
        return Device(self.data.device_id)

    @property
    def base(self):
        """The array whose memory a view shares; None for a base array."""
        return self._base

    def __len__(self):
        if not self._a.ndim:
            raise TypeError("len() of unsized object")
        return self._a.shape[0]

    def _view(self, v):
        """A view ``v`` of this array's memory: its ``data.ptr`` points at
        its first element, and its ``base`` is the base array, as CuPy's."""
        data = self.data
        delta = v.ctypes.data - self._a.ctypes.data
        if delta and data.ptr:
            data = data + delta
        return ndarray._wrap(v, data,
                             self if self._base is None else self._base)

    @property
    def T(self):
        return self._view(self._a.T)

    def transpose(self, *axes):
        return self._view(self._a.transpose(*axes))

    def swapaxes(self, axis1, axis2):
        return self._view(self._a.swapaxes(axis1, axis2))

    def squeeze(self, axis=None):
        return self._view(self._a.squeeze(axis))

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = shape[0]
        try:
            return self._view(self._a.reshape(shape, order=order, copy=False))
        except ValueError:
            if math.prod(self.shape) != math.prod(
                    s for s in shape if s != -1) and -1 not in shape:
                raise ValueError(f"cannot reshape array of size {self.size} "
                                 f"into shape {tuple(shape)}") from None
            out = self.copy(order=order)
            out._a = out._a.reshape(shape, order=order)
            return out

    def ravel(self, order="C"):
        return self.reshape(-1, order=order)

    def flatten(self, order="C"):
        out = self.copy(order=order)
        out._a = out._a.reshape(-1, order=order)
        return out

    def view(self, dtype=None):
        return self._view(self._a if dtype is None else self._a.view(dtype))

    # -- queued data operations --
    def copy(self, order="C"):
        """A new array with the same data, copied on the current stream."""
        _check_device([self])
        out = _empty(self.shape, self.dtype, order)
        src, dst = self._a, out._a
        _launch(lambda: numpy.copyto(dst, src), src.nbytes + dst.nbytes)
        return out

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        dtype = numpy.dtype(dtype)
        if dtype == self.dtype and not copy:
            return self
        _check_device([self])
        out = _empty(self.shape, dtype, "F" if order == "F" else "C")
        src, dst = self._a, out._a
        if src.dtype.kind == "c" and dtype.kind != "c":
            src = src.real              # CuPy takes .real, with no warning
        nbytes = src.nbytes + dst.nbytes
        if src.dtype.kind == "f" and dtype.kind in "iu":
            _launch(lambda: numpy.copyto(dst, _float_to_int(src, dtype)),
                    nbytes)
        else:
            _launch(lambda: numpy.copyto(dst, src, casting="unsafe"), nbytes)
        return out

    def fill(self, value):
        """Fill with a scalar; the value is converted at the call, as
        CuPy converts it (a bad value raises here, not at a later sync)."""
        _check_device([self])
        dst = self._a
        if isinstance(value, ndarray):
            if value.shape != ():
                raise ValueError(
                    "non-scalar cupy.ndarray cannot be used for fill")
            _check_device([value])
            src = value.astype(self.dtype, copy=False)._a
            _launch(lambda: dst.fill(src[()]), dst.nbytes)
            return
        value = numpy.asarray(value, dtype=self.dtype)
        if value.shape != ():
            raise ValueError(
                "non-scalar numpy.ndarray cannot be used for fill")
        value = value[()]
        _launch(lambda: dst.fill(value), dst.nbytes)

    def __getitem__(self, key):
        k = key if isinstance(key, tuple) else (key,)
        if any(isinstance(x, (ndarray, numpy.ndarray, list)) for x in k):
            return _gather(self, _host_key(self.shape, k))
        v = self._a[k + (Ellipsis,)] if Ellipsis not in k else self._a[k]
        return self._view(v)

    def __setitem__(self, key, value):
        _check_device([self])
        k = key if isinstance(key, tuple) else (key,)
        if any(isinstance(x, (ndarray, numpy.ndarray, list)) for x in k):
            k = _host_key(self.shape, k)
        dst = self._a
        target_shape = numpy.broadcast_to(numpy.empty((), numpy.int8),
                                          self.shape)[k].shape
        if isinstance(value, ndarray):
            _check_device([value])
            _broadcast_shape([numpy.empty(target_shape, numpy.int8),
                              value._a])
            src = value._a
        else:
            _check_host_operand(value)
            src = value

        def run():
            dst[k] = src
        _launch(run, 2 * dst.nbytes)

    # -- host access: these wait --
    def get(self, stream=None, order="C", out=None, blocking=True):
        """Copy to a NumPy array on the host (waits unless told not to)."""
        if out is not None:
            if not isinstance(out, numpy.ndarray):
                raise TypeError("Only numpy.ndarray can be obtained from "
                                "cupy.ndarray")
            if self.dtype != out.dtype:
                raise TypeError("{} array cannot be obtained from {} array "
                                "(give an `out` of dtype {})".format(
                                    out.dtype, self.dtype, self.dtype))
            if self.shape != out.shape:
                raise ValueError("Shape mismatch. Expected shape: {}, "
                                 "actual shape: {} (give an `out` of the "
                                 "array's shape)".format(self.shape,
                                                         out.shape))
        else:
            out = numpy.empty(self.shape, self.dtype,
                              order="F" if order == "F" else "C")
        with Device(self.data.device_id):
            return _d2h(out, self._a, stream, blocking)

    def set(self, arr, stream=None):
        """Copy host array ``arr`` into this array, on ``stream``."""
        if not isinstance(arr, numpy.ndarray):
            raise TypeError("Only numpy.ndarray can be set to cupy.ndarray")
        if self.dtype != arr.dtype:
            raise TypeError("{} array cannot be set to {} array (convert it "
                            "first: arr.astype(numpy.{}))".format(
                                arr.dtype, self.dtype, self.dtype))
        if self.shape != arr.shape:
            raise ValueError("Shape mismatch. Old shape: {}, new shape: {} "
                             "(set() copies an array of the same shape; "
                             "reshape it first)".format(self.shape,
                                                        arr.shape))
        with Device(self.data.device_id):
            _h2d(self._a, arr, stream)

    def __array__(self, dtype=None, copy=None):
        raise TypeError(
            "Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly.")

    def tolist(self):
        return self.get().tolist()

    def item(self):
        return self.get().item()

    def __float__(self):
        return float(self.get())

    def __int__(self):
        return int(self.get())

    def __index__(self):
        return operator.index(self.get()[()])

    def __bool__(self):
        return bool(self.get())

    def __complex__(self):
        return complex(self.get())

    def __repr__(self):
        return repr(self.get())

    def __str__(self):
        return str(self.get())

    def __format__(self, spec):
        return format(self.get()[()] if self.ndim == 0 else self.get(), spec)

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

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

    def __pos__(self):
        return self

    def __abs__(self):
        return _ufunc(numpy.absolute, self)

    def __invert__(self):
        return _ufunc(numpy.invert, self)


for _name, _method in REDUCTIONS.items():
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


def _host_key(shape, key):
    """An advanced index with its arrays on the host, integer index arrays
    wrapped into range as CuPy's take and scatter kernels wrap them
    (``x[cp.array([5])]`` of a length-3 ``x`` is ``x[2]``; ``-4`` too).
    Integer scalars and slices are checked as NumPy checks them."""
    k = []
    for x in key:
        if isinstance(x, ndarray):
            x = x.get()
        elif isinstance(x, list):
            x = numpy.asarray(x)
            if x.size == 0 and x.dtype.kind == "f":
                x = x.astype(numpy.intp)
        k.append(x)

    def width(x):
        if x is None or x is Ellipsis:
            return 0
        if isinstance(x, numpy.ndarray) and x.dtype == numpy.bool_:
            return x.ndim
        return 1
    rest = len(shape) - sum(width(x) for x in k)
    axis, out = 0, []
    for x in k:
        if x is Ellipsis:
            axis += max(rest, 0)
        elif isinstance(x, numpy.ndarray) and x.dtype.kind in "iu" and \
                axis < len(shape) and shape[axis] > 0:
            x = x % shape[axis]
        axis += width(x)
        out.append(x)
    return tuple(out)


def _float_to_int(src, dtype):
    """Float to integer as the GPU converts (CuPy's documented result):
    truncate toward zero, NaN gives 0, values beyond the type's range give
    its min or max (NumPy's result there depends on the CPU). CuPy's
    documentation shows it for 32-bit results (``-1.0`` to uint32 is 0,
    ``inf`` to int32 is 2147483647); 8- and 16-bit results saturate the
    same way on the model, which a GPU's code for them may not."""
    from ._ctranslate import _saturate_to_int
    return _saturate_to_int(src, dtype)


def _gather(a, key):
    """Advanced indexing: index arrays are read on the host, then queued."""
    shape = numpy.broadcast_to(numpy.empty((), numpy.int8), a.shape)[key].shape
    _check_device([a])
    return _queue_into(shape, a.dtype, lambda src: src[key], [a])


# -- creation ---------------------------------------------------------------------
def empty(shape, dtype=float, order="C"):
    return _empty(_normalize_shape(shape), dtype, order)


def full(shape, fill_value, dtype=None, order="C"):
    shape = _normalize_shape(shape)
    if dtype is None:
        dtype = numpy.asarray(fill_value).dtype
    out = _empty(shape, dtype, order)
    out.fill(fill_value)
    return out


def zeros(shape, dtype=float, order="C"):
    return full(shape, 0, dtype, order)


def ones(shape, dtype=float, order="C"):
    return full(shape, 1, dtype, order)


def _like(a, dtype, shape):
    return (a.dtype if dtype is None else dtype,
            a.shape if shape is None else shape)


def empty_like(prototype, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(prototype, dtype, shape)
    return empty(shape, dtype)


def zeros_like(a, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(a, dtype, shape)
    return zeros(shape, dtype)


def ones_like(a, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(a, dtype, shape)
    return ones(shape, dtype)


def full_like(a, fill_value, dtype=None, order="K", subok=None, shape=None):
    dtype, shape = _like(a, dtype, shape)
    return full(shape, fill_value, dtype)


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


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *,
          blocking=False):
    if isinstance(obj, ndarray):
        if not copy and obj.device.id == runtime.getDevice() and \
                (dtype is None or numpy.dtype(dtype) == obj.dtype):
            return obj
        if obj.device.id != runtime.getDevice():
            obj = obj.get()
        else:
            return obj.astype(obj.dtype if dtype is None else dtype)
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


def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    """``a`` as a device array on the current device (``a`` itself if it is
    one already); from the host, a copy on the current stream."""
    return array(a, dtype, copy=bool(copy), order=order or "K",
                 blocking=blocking)


def ascontiguousarray(a, dtype=None):
    a = asarray(a, dtype)
    return a if a.flags.c_contiguous else a.copy()


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
