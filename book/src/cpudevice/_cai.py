"""``__cuda_array_interface__`` (version 3) on the CPU device model, with
CuPy 14.2's rules and errors: this module adds the property to ``ndarray``
and gives `as_cupy_like`, the conversion ``array``/``asarray`` use.

The interface shares memory: the consumer's array views the producer's
bytes (`cuda.base_memory.UnownedMemory`), nothing is copied. It names the
producer's ``stream`` (its current stream when exported; the default
stream's handle, 1 or 2, for the null stream). Importing synchronizes that
stream from the host (``runtime.streamSynchronize``), unless
``_util.CUDA_ARRAY_INTERFACE_SYNC`` is False
(CUPY_CUDA_ARRAY_INTERFACE_SYNC=0) or the interface has no stream (version
2, or ``CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION=2``). Without that, a
consumer's work on another stream may read the bytes before the producer's
work has written them: a real race on the model, whose streams do their
work on worker threads.
"""
import numpy

from . import _util
from ._ndarray import ndarray
from .cuda import runtime
from .cuda.base_memory import UnownedMemory
from .cuda.handles import _default_stream_ptr
from .cuda.memory import MemoryPointer
from .cuda.stream import get_current_stream_ptr


# -- __cuda_array_interface__ -------------------------------------------------
def _cuda_array_interface(self):
    """The CUDA array interface (version 3): shape, typestr, descr,
    strides (None when C-contiguous), data ``(pointer, False)`` (0 for an
    empty array) and ``stream``: the current stream's handle (the default
    stream's, 1 or 2, for the null stream), whose work the consumer must
    wait for. With CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION=2, version 2 and
    no stream."""
    desc = {'shape': self.shape, 'typestr': self.dtype.str,
            'descr': self.dtype.descr}
    ver = _util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION
    if ver == 3:
        stream_ptr = get_current_stream_ptr()
        if stream_ptr == 0:             # v3 disallows 0
            stream_ptr = _default_stream_ptr()
        desc['stream'] = stream_ptr
    elif ver != 2:
        raise ValueError('CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION can '
                         'only be set to 3 (default) or 2')
    desc['version'] = ver
    desc['strides'] = None if self.flags.c_contiguous else self.strides
    desc['data'] = (self.data.ptr if self.size > 0 else 0, False)
    return desc


def _cai_dtype(desc):
    """The dtype an interface describes (a structured one from ``descr``)."""
    dtype = numpy.dtype(desc['typestr'])
    descr = desc.get('descr')
    if dtype.kind != 'V' or not isinstance(descr, list):
        return dtype
    offset, names, offsets, formats = 0, [], [], []
    for name, fmt in descr:
        field = numpy.dtype(fmt)
        if name:                        # no name: padding
            names.append(name)
            formats.append(field)
            offsets.append(offset)
        offset += field.itemsize
    return numpy.dtype({"names": names, "offsets": offsets,
                        "formats": formats})


def _from_cuda_array_interface(a):
    """An ndarray viewing the memory ``a.__cuda_array_interface__``
    describes (zero copy; ``a`` is kept alive). When it names a stream, the
    host first synchronizes that stream, unless
    ``_util.CUDA_ARRAY_INTERFACE_SYNC`` is False."""
    desc = a.__cuda_array_interface__
    shape = desc['shape']
    if type(shape) is not tuple:
        raise TypeError(f"Expected tuple, got {type(shape).__name__}")
    ptr = desc['data'][0]
    dtype = _cai_dtype(desc)
    if dtype.byteorder == '>':
        raise ValueError('CuPy does not support the big-endian byte-order')
    if desc.get('mask') is not None:
        raise ValueError('CuPy currently does not support masked arrays.')
    strides = desc.get('strides')
    if strides is not None:
        nbytes = max([abs(sh * st) for sh, st in zip(shape, strides)],
                     default=0)
    else:
        nbytes = numpy.prod(shape, dtype=numpy.int64) * dtype.itemsize
    # version 2 gives pointer 0 for an empty array: the current device's
    dev_id = runtime.getDevice() if nbytes == 0 else -1
    mem = UnownedMemory(ptr, int(nbytes), a, dev_id)
    stream_ptr = desc.get('stream')
    if stream_ptr is not None and _util.CUDA_ARRAY_INTERFACE_SYNC:
        runtime.streamSynchronize(stream_ptr)
    return ndarray(shape, dtype, MemoryPointer(mem, 0), strides)


def as_cupy_like(obj):
    """``obj`` as an ndarray if it is one or speaks a CuPy protocol
    (``__cuda_array_interface__``, ``__cupy_get_ndarray__``); else None."""
    if isinstance(obj, ndarray):
        return obj
    if hasattr(obj, '__cuda_array_interface__'):
        return _from_cuda_array_interface(obj)
    if hasattr(obj, '__cupy_get_ndarray__'):
        return obj.__cupy_get_ndarray__()
    return None


ndarray.__cuda_array_interface__ = property(
    _cuda_array_interface, doc=_cuda_array_interface.__doc__)
