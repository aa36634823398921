"""DLPack on the CPU device model (CuPy's ``_core.dlpack``), with CuPy
14.2's rules and errors: this module adds ``__dlpack__``,
``__dlpack_device__`` and ``toDlpack`` to ``ndarray`` and gives
``from_dlpack`` and ``fromDlpack``.

DLPack shares memory: the consumer's array views the producer's bytes
(`DLPackMemory`), nothing is copied. The consumer passes its stream to
``__dlpack__(stream=...)``; the producer records an event on its own
current stream and makes that stream wait for it, unless the two are the
same stream or the consumer passes -1. The host never waits. Given the
wrong stream, a consumer's work may read the bytes before the producer's
work has written them: a real race on the model.

A capsule is a real ``PyCapsule`` ("dltensor", or "dltensor_versioned" for
``max_version >= (1, 0)``) holding a real DLPack struct, made with ctypes:
NumPy reads it and refuses its device (kDLCUDA) as it refuses CuPy's.
Exported to the CPU (``dl_device=(kDLCPU, 0)``), the array is copied to the
host and NumPy's own capsule of the copy is given. The model's capsules
have no destructor (ctypes cannot make one that is safe while an exception
is being raised): the model keeps each capsule and the array it exports,
and lets them go at its next DLPack call once nothing else holds the
capsule, or when it consumes the capsule.
"""
import ctypes
import sys
import threading
import warnings

import numpy
from numpy.exceptions import VisibleDeprecationWarning

from ._hardware import api
from ._ndarray import ndarray
from .cuda import runtime
from .cuda.base_memory import (BaseMemory, _Region, memoryTypeManaged,
                               pointerGetAttributes, pointerGetMemoryType)
from .cuda.handles import _default_stream_ptr, _stream_of_handle
from .cuda.memory import MemoryPointer
from .cuda.stream import get_current_stream, get_current_stream_ptr


# -- DLPack: the structs ------------------------------------------------------
kDLCPU, kDLCUDA, kDLCUDAHost, kDLROCM, kDLCUDAManaged = 1, 2, 3, 10, 13
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool = 0, 1, 2, 4, 5, 6
_IS_COPIED = 1 << 1                     # DLPACK_FLAG_BITMASK_IS_COPIED
_VERSION = (1, 0)                       # the DLPack version CuPy 14.2 makes


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _DLPackVersion),
                ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64),
                ("dl_tensor", _DLTensor)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

# The capsule calls, with argument types of their own (not set on
# ctypes.pythonapi's shared functions). A capsule keeps its name's pointer:
# the names are these module constants, alive as long as the process.
_py = ctypes.PyDLL(ctypes.pythonapi._name, handle=ctypes.pythonapi._handle)
_new = _py.PyCapsule_New
_new.restype, _new.argtypes = ctypes.py_object, [
    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_is_valid = _py.PyCapsule_IsValid
_is_valid.restype, _is_valid.argtypes = ctypes.c_int, [
    ctypes.py_object, ctypes.c_char_p]
_get_pointer = _py.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = ctypes.c_void_p, [
    ctypes.py_object, ctypes.c_char_p]
_set_name = _py.PyCapsule_SetName
_set_name.restype, _set_name.argtypes = ctypes.c_int, [
    ctypes.py_object, ctypes.c_char_p]
_NAME, _NAME_VER = b"dltensor", b"dltensor_versioned"
_USED, _USED_VER = b"used_dltensor", b"used_dltensor_versioned"

# The capsules the model made and no consumer took yet, by id: each with
# its struct, its shape and strides and the array it exports.
_exported = {}
_lock = threading.Lock()


def _sweep():
    """Let go of each exported capsule that nothing but `_exported` holds
    (the reference from the dict's entry and getrefcount's argument)."""
    with _lock:
        dropped = [_exported.pop(key) for key, entry in list(_exported.items())
                   if sys.getrefcount(entry[0]) <= 2]
    del dropped                     # their arrays are freed outside the lock


def _dtype_code(dtype):
    """DLPack's type code of ``dtype`` (BufferError for others)."""
    code = {'u': kDLUInt, 'i': kDLInt, 'f': kDLFloat, 'c': kDLComplex,
            'b': kDLBool}.get(dtype.kind)
    if code is None:
        if dtype.name == "bfloat16":
            return kDLBfloat
        raise BufferError('dtype is not supported for dlpack export')
    return code


# -- DLPack: the producer -----------------------------------------------------
def __dlpack_device__(self):
    """``(device type, device id)``: kDLCUDA (2), or kDLCUDAManaged (13) for
    managed memory."""
    managed = pointerGetMemoryType(self.data.ptr) == memoryTypeManaged
    return (kDLCUDAManaged if managed else kDLCUDA, self.data.device_id)


@api("call")
def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
               copy=None):
    """A DLPack capsule of this array, for a consumer whose stream is
    ``stream`` (a handle; None: the legacy stream, 1; -1: no ordering).

    Unless the consumer's stream is the current one, the current stream
    records an event and the consumer's stream waits for it: the consumer's
    later work follows the work queued here so far, and the host does not
    wait. ``max_version >= (1, 0)`` gives a versioned capsule.
    ``dl_device=(kDLCPU, 0)`` copies the array to the host (``copy=False``
    refuses unless the memory is managed); another device, or ``copy=True``
    without it, is BufferError."""
    if max_version is not None and not isinstance(max_version, tuple):
        raise TypeError("Argument 'max_version' has incorrect type "
                        f"(expected tuple, got {type(max_version).__name__})")
    use_versioned = max_version is not None and max_version[0] >= 1
    to_cpu = False
    consumer_stream = -2
    if dl_device is None or dl_device == self.__dlpack_device__():
        if copy is True:
            raise BufferError("copy=True only supported for copy to CPU.")
    elif dl_device == (kDLCPU, 0):
        if copy is False and self.__dlpack_device__()[0] != kDLCUDAManaged:
            raise ValueError(
                "GPU memory cannot be exported to CPU without copy.")
        to_cpu = True
    else:
        raise BufferError("unsupported device requested.")

    curr_stream = get_current_stream()
    curr_stream_ptr = curr_stream.ptr
    if not to_cpu:
        if stream is None:
            consumer_stream = runtime.streamLegacy
        elif isinstance(stream, int):
            consumer_stream = stream
        if consumer_stream < -1:
            raise ValueError(
                f'On CUDA, the valid stream for the DLPack protocol is -1,'
                f' 1, 2, or any larger value, but {stream} was provided')
        elif consumer_stream == 0:
            warnings.warn(
                'Stream 0 is passed from a library that you are'
                ' converting to; CuPy assumes 0 as a legacy default '
                'stream. Please report this problem to the library as this'
                ' violates the DLPack protocol.')
            consumer_stream = runtime.streamLegacy
        if curr_stream_ptr == 0:
            curr_stream_ptr = runtime.streamLegacy
    if consumer_stream >= 0 and consumer_stream != curr_stream_ptr:
        event = curr_stream.record()
        _stream_of_handle(consumer_stream).wait_event(event)
    return _to_dlpack(self, use_versioned, to_cpu, copy is True)


def _to_dlpack(array, use_versioned, to_cpu, ensure_copy):
    """The capsule of ``array`` (see `__dlpack__`)."""
    code = _dtype_code(array.dtype)
    dev_type, dev_id = array.__dlpack_device__()
    if to_cpu and (ensure_copy or dev_type != kDLCUDAManaged):
        host = array.get(stream=None, order='A', out=None, blocking=True)
        if not use_versioned:
            return host.__dlpack__()
        capsule = host.__dlpack__(max_version=_VERSION)
        _DLManagedTensorVersioned.from_address(
            _get_pointer(capsule, _NAME_VER)).flags |= _IS_COPIED
        return capsule
    if to_cpu:          # managed memory, exported as is: the host must wait
        get_current_stream().synchronize()
    _sweep()
    ndim, itemsize = array.ndim, array.itemsize
    dims = (ctypes.c_int64 * max(2 * ndim, 1))(
        *array.shape, *[s // itemsize for s in array.strides])
    struct = (_DLManagedTensorVersioned if use_versioned
              else _DLManagedTensor)()
    if use_versioned:
        struct.version.major, struct.version.minor = _VERSION
    t = struct.dl_tensor
    t.data = array.data.ptr
    t.device.device_type, t.device.device_id = dev_type, dev_id
    t.ndim = ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, itemsize * 8, 1
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.cast(ctypes.byref(dims, 8 * ndim),
                            ctypes.POINTER(ctypes.c_int64))
    t.byte_offset = 0
    capsule = _new(ctypes.addressof(struct),
                   _NAME_VER if use_versioned else _NAME, None)
    with _lock:
        _exported[id(capsule)] = (capsule, struct, dims, array)
    return capsule


def toDlpack(self):
    """A DLPack capsule of this array (versioned). Deprecated, with CuPy's
    VisibleDeprecationWarning: use ``cupy.from_dlpack``."""
    warnings.warn(
        "This function is deprecated and will be removed in a future "
        "release. Use the cupy.from_dlpack() array constructor instead.",
        VisibleDeprecationWarning)
    return _to_dlpack(self, True, False, False)


# -- DLPack: the consumer -----------------------------------------------------
class _Foreign:
    """A capsule's tensor made by another producer, taken over: freed by its
    own deleter when the memory viewing it is freed."""

    def __init__(self, address, deleter):
        self.address, self.deleter = address, deleter

    def __del__(self):
        if self.deleter:
            _DELETER(self.deleter)(self.address)


class DLPackMemory(BaseMemory):
    """The memory of a consumed DLPack tensor: it allocates nothing and
    views the producer's bytes; ``_owner`` keeps them alive (the producer's
    array, or another producer's tensor until its deleter runs)."""

    __slots__ = ("size", "device_id", "ptr", "chunk", "_owner",
                 "__weakref__")

    def __init__(self, ptr, size, device_id, owner):
        self.ptr, self.size, self.device_id = ptr, size, device_id
        self._owner = owner
        self.chunk = _Region(ptr, size)


def _take(dltensor):
    """Consume a capsule (renamed "used_..."): ``(DLTensor, owner)``."""
    if _is_valid(dltensor, _NAME):
        names = (_NAME, _USED, _DLManagedTensor)
    elif _is_valid(dltensor, _NAME_VER):
        names = (_NAME_VER, _USED_VER, _DLManagedTensorVersioned)
    else:
        raise ValueError(
            'A DLPack tensor object cannot be consumed multiple times '
            f'(or object was not a DLPack capsule). Got: {dltensor!r}')
    name, used, kind = names
    address = _get_pointer(dltensor, name)
    _set_name(dltensor, used)
    managed = kind.from_address(address)
    with _lock:
        entry = _exported.pop(id(dltensor), None)
    owner = (entry if entry is not None and entry[0] is dltensor
             else _Foreign(address, managed.deleter))
    if kind is _DLManagedTensorVersioned and \
            managed.version.major > _VERSION[0]:
        raise BufferError("DLPack exported too new major version.")
    return managed.dl_tensor, owner


_DTYPES = {kDLUInt: ('uint', (8, 16, 32, 64)),
           kDLInt: ('int', (8, 16, 32, 64)),
           kDLFloat: ('float', (16, 32, 64)),
           kDLComplex: ('complex', (64, 128))}


def _dtype_of(dtype):
    """The NumPy dtype of a DLPack type, with CuPy's errors."""
    bits = dtype.bits
    if dtype.lanes != 1:
        raise ValueError(f'vector dtypes (lanes={dtype.lanes}) is '
                         'not supported')
    if dtype.code in _DTYPES:
        name, sizes = _DTYPES[dtype.code]
        if bits not in sizes:
            raise TypeError(f'{name}{bits} is not supported.')
        return numpy.dtype(f'{name}{bits}')
    if dtype.code == kDLBool:
        if bits != 8:
            raise TypeError(f'{bits}-bit bool is not supported')
        return numpy.dtype(numpy.bool_)
    if dtype.code == kDLBfloat:
        raise NotImplementedError(
            'CuPy does not support bfloat16. Please install ml_dtypes to '
            'use bfloat16.')
    raise TypeError('Unsupported dtype. dtype code: {}'.format(dtype.code))


def _dlpack_to_array(dltensor):
    """The ndarray viewing a capsule's tensor (zero copy)."""
    _sweep()
    t, owner = _take(dltensor)
    if t.device.device_type not in (kDLCUDA, kDLCUDAManaged):
        raise RuntimeError('CuPy is built against CUDA, different '
                           'from the backend that backs the incoming '
                           'DLPack tensor')
    ptr = t.data or 0
    if t.device.device_type == kDLCUDAManaged:
        device_id = pointerGetAttributes(ptr).device
    else:
        device_id = t.device.device_id
    dtype = _dtype_of(t.dtype)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = None
    if t.strides:
        strides = tuple(t.strides[i] * (t.dtype.bits // 8)
                        for i in range(t.ndim))
    if not all(shape):
        extent = 0
    elif strides is None:
        extent = dtype.itemsize * int(numpy.prod(shape))
    else:
        extent = dtype.itemsize + sum(
            (n - 1) * abs(s) for n, s in zip(shape, strides))
    mem = DLPackMemory(ptr, t.byte_offset + extent, device_id, owner)
    return ndarray(shape, dtype, MemoryPointer(mem, t.byte_offset), strides)


@api("call")
def from_dlpack(array, *, device=None, copy=None):
    """An ndarray sharing the memory of ``array``, an object with
    ``__dlpack__`` and ``__dlpack_device__`` (or a DLPack capsule, for
    backward compatibility), safe to use on the current stream: the
    producer is given the current stream's handle, so its work is ordered
    before it. CPU arrays are refused (TypeError: copy them with
    ``cp.array(numpy.from_dlpack(x))``), as CuPy refuses them."""
    if not hasattr(array, '__dlpack_device__'):
        return _dlpack_to_array(array)
    dev_type, dev_id = array.__dlpack_device__()
    if device is not None:
        raise NotImplementedError("from_dlpack() does not support device yet.")
    if dev_type in (kDLCUDA, kDLCUDAManaged):
        prev_device = runtime.getDevice()
        try:
            runtime.setDevice(dev_id)
            stream = get_current_stream_ptr()
            if stream == 0:
                stream = _default_stream_ptr()
            try:
                dltensor = array.__dlpack__(stream=stream,
                                            max_version=_VERSION, copy=copy)
            except TypeError:
                if copy is not None:
                    raise
                dltensor = array.__dlpack__(stream=stream)
        finally:
            runtime.setDevice(prev_device)
    elif dev_type == kDLROCM:
        raise AssertionError        # CuPy's `assert runtime._is_hip_...`
    elif dev_type == kDLCPU:
        raise TypeError(
            'CPU arrays cannot be directly imported to CuPy. '
            'Use `cupy.array(numpy.from_dlpack(input))` instead.')
    else:
        raise TypeError(f'Unsupported array type: {dev_type}')
    return _dlpack_to_array(dltensor)


def fromDlpack(dltensor):
    """The ndarray sharing a DLPack capsule's memory. Deprecated, with
    CuPy's VisibleDeprecationWarning: use ``cupy.from_dlpack``."""
    warnings.warn(
        "This function is deprecated and will be removed in a future "
        "release. Use the cupy.from_dlpack() array constructor instead.",
        VisibleDeprecationWarning)
    return _dlpack_to_array(dltensor)


ndarray.__dlpack__ = __dlpack__
ndarray.__dlpack_device__ = __dlpack_device__
ndarray.toDlpack = toDlpack
