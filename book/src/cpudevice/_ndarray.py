"""The device ndarray of the CPU device model (``cupy.ndarray``).

An array is a NumPy view of a pool block plus the block's pointer. Every
operation that touches data is queued on the current stream and returns at
once, with its result allocated from the pool at the call; shapes, dtypes
and argument errors are checked at the call, as CuPy checks them. The host
waits only where CuPy waits: ``get``, ``asnumpy``, ``print``, ``float``,
``int``, ``bool``, ``item``. As in CuPy, ``numpy.asarray(x)`` raises
``TypeError``: a copy to the host is always explicit.
"""
import contextlib
import math
import operator

import numpy

from .cuda import allocator as _allocator, managed as _managed, runtime
from .cuda.device import Device
from ._hardware import api
from ._core import (_broadcast_shape, _check_device, _check_host_operand,
                    _launch, _normalize_shape)
from ._copies import _d2h, _h2d


# -- the array ----------------------------------------------------------------
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
        if data.ptr:        # the address of this array's first element
            delta = v.ctypes.data - data.ptr
            if delta:
                data = data + delta
        return ndarray._wrap(v, data,
                             self if self._base is None else self._base)

    @property
    def T(self):
        return self._view(self._a.T)

    @api("call")
    def transpose(self, *axes):
        return self._view(self._a.transpose(*axes))

    @api("call")
    def swapaxes(self, axis1, axis2):
        return self._view(self._a.swapaxes(axis1, axis2))

    @api("call")
    def squeeze(self, axis=None):
        return self._view(self._a.squeeze(axis))

    @api("call")
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

    @api("call")
    def ravel(self, order="C"):
        return self.reshape(-1, order=order)

    @api("launch")
    def flatten(self, order="C"):
        out = self.copy(order=order)
        out._a = out._a.reshape(-1, order=order)
        return out

    @api("call")
    def view(self, dtype=None):
        return self._view(self._a if dtype is None else self._a.view(dtype))

    # -- queued data operations --
    @api("launch")
    def copy(self, order="C"):
        """A new array with the same data, copied on the current stream."""
        _check_device([self])
        out = _empty(self.shape, self.dtype, order)
        src, dst = self._a, out._a
        _launch(lambda: numpy.copyto(dst, src), src.nbytes + dst.nbytes)
        return out

    @api("launch")
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

    @api("launch")
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
        _launch(lambda: dst.fill(value), dst.nbytes,
                migrate=_migration((self,)))

    @api("call")
    def __getitem__(self, key):
        k = key if isinstance(key, tuple) else (key,)
        if any(isinstance(x, (ndarray, numpy.ndarray, list)) for x in k):
            return _gather(self, _host_key(self.shape, k))
        v = self._a[k + (Ellipsis,)] if Ellipsis not in k else self._a[k]
        return self._view(v)

    @api("launch")
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
    @api("copy")
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
        with _on_device(self.data.device_id):
            return _d2h(out, self._a, stream, blocking)

    @api("copy")
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
        with _on_device(self.data.device_id):
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

    def __pos__(self):
        return self

    # Its arithmetic, comparisons, ``dot``, ``@`` and reductions are the
    # routines (`_routines`, above this module), which add them to the class.


# -- allocation, and queueing into new arrays ---------------------------------
def _empty(shape, dtype, order="C"):
    if not isinstance(dtype, numpy.dtype):
        dtype = numpy.dtype(dtype)
    if type(shape) is not tuple:
        shape = _normalize_shape(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    # `get_allocator()`, inline: the hot path
    memptr = (_allocator._tls.allocator or _allocator._current)(nbytes)
    order = "F" if order == "F" else "C"
    if nbytes:          # the block's bytes (`MemoryPointer._buffer`)
        chunk = memptr.mem.chunk
        if chunk is None:   # an allocator lent another library's memory
            chunk = memptr.mem.view()           # (UnownedMemory)
        view = numpy.ndarray(shape, dtype, chunk.mem.buf,
                             memptr.ptr - chunk.mem.ptr, order=order)
    else:
        view = numpy.ndarray(shape, dtype, numpy.empty(0, numpy.uint8),
                             order=order)
    return ndarray._wrap(view, memptr)


def _migration(arrays):
    """Seconds a kernel over ``arrays`` stalls migrating the pages of those
    in managed memory (none: 0, at once)."""
    if not _managed.live:
        return 0.0
    return _managed.touch([(a.data.mem, a.data.ptr, a._a.nbytes)
                           for a in arrays if isinstance(a, ndarray)])


def _nbytes(args):
    """Bytes a kernel reads from the device arrays among ``args``, each
    array once (``x + x`` reads ``x`` once: a GPU kernel reads each value
    into a register and uses it twice)."""
    if len(args) == 1:
        a = args[0]
        return a._a.nbytes if isinstance(a, ndarray) else 0
    seen = {(a.data.ptr, a._a.nbytes): a._a.nbytes for a in args
            if isinstance(a, ndarray)}
    return sum(seen.values())


def _queue_into(shape, dtype, fn, args):
    """Allocate ``out`` now and queue ``out[...] = fn(*args)``, device arrays
    in ``args`` read as their data when the work runs; return ``out``."""
    out = _empty(shape, dtype)
    views = [a._a if isinstance(a, ndarray) else a for a in args]
    dst = out._a

    def run():
        dst[...] = fn(*views)
    _launch(run, _nbytes(args) + dst.nbytes,
            migrate=_migration((out,) + tuple(args)))
    return out


_CURRENT = contextlib.nullcontext()


def _on_device(device_id):
    """``with Device(device_id)``; nothing to enter when it is current."""
    return _CURRENT if device_id == runtime._tls.device else Device(device_id)


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
    from ._csemantics import _saturate_to_int
    return _saturate_to_int(src, dtype)


def _gather(a, key):
    """Advanced indexing: index arrays are read on the host, then queued."""
    shape = numpy.broadcast_to(numpy.empty((), numpy.int8), a.shape)[key].shape
    _check_device([a])
    return _queue_into(shape, a.dtype, lambda src: src[key], [a])
