"""The memory classes below the pool (``cupy.cuda.memory``'s), on the CPU
device model: `BaseMemory`, the base of every memory class; the device's
own allocations (`_Device_Memory`, a real byte buffer each); and memory
CuPy does not own (`UnownedMemory`, another library's).

Every allocation taken from a device is registered by its address, so that
``runtime.pointerGetAttributes`` can say what a raw pointer is (device,
managed, pinned host or unregistered memory), and `UnownedMemory` can view
the bytes of the allocation a pointer lies in: zero copy, as on a GPU. This
module sets ``pointerGetAttributes`` and its names into `runtime`.
"""
import ctypes
import operator
import weakref

import numpy

from . import runtime
from .device import Device
from .pinned_memory import _pinned_range

_ALIGN = 256          # cudaMalloc returns 256-byte aligned addresses


# cudaPointerGetAttributes' memory types (cupy.cuda.runtime's names)
memoryTypeUnregistered, memoryTypeHost, memoryTypeDevice, \
    memoryTypeManaged = 0, 1, 2, 3

# Each live allocation taken from a device (a cudaMalloc's, a managed one's,
# a stream-ordered pool's), by its address: a weak reference to its bytes,
# with what `pointerGetAttributes` says of them. The reference is to the
# NumPy buffer, which the garbage collector does not track, so it is
# cleared only when the bytes are really freed. (One to the `_Device_Memory`
# would be cleared when a pool's block in a cycle of garbage is collected,
# although the block's finalizer gives it back to the pool, alive.) Adding,
# copying and the removal of a dead entry are each one step under the GIL:
# no lock (README.md, Locks).
_allocations = {}


class _Allocation(weakref.ref):
    """A weak reference to an allocation's bytes, and their attributes."""

    __slots__ = ("ptr", "size", "device_id", "type")


def _forget(ref):
    """``ref``'s bytes are freed: drop its entry (a new allocation at the
    same address cannot exist before the old one's bytes are freed)."""
    if _allocations.get(ref.ptr) is ref:
        _allocations.pop(ref.ptr, None)


class _Device_Memory:
    """One allocation taken from the device: a real byte buffer of memory
    type ``type`` (`memoryTypeManaged` for managed memory)."""

    __slots__ = ("buf", "size", "ptr", "device_id")

    def __init__(self, size, device_id, type=memoryTypeDevice):
        raw = numpy.empty(size + _ALIGN - 1, numpy.uint8)
        start = -raw.ctypes.data % _ALIGN
        self.buf = raw[start:start + size]
        self.size = size
        self.ptr = self.buf.ctypes.data
        self.device_id = device_id
        if size:
            ref = _Allocation(self.buf, _forget)
            ref.ptr, ref.size, ref.device_id, ref.type = (
                self.ptr, size, device_id, type)
            _allocations[self.ptr] = ref


def _allocation_of(ptr):
    """``(entry, its bytes)`` of the live allocation that address ``ptr``
    lies in, or ``(None, None)``."""
    for ref in _allocations.copy().values():
        if ref.ptr <= ptr < ref.ptr + ref.size:
            buf = ref()
            if buf is not None:
                return ref, buf
    return None, None


class PointerAttributes:
    """What cudaPointerGetAttributes says of a pointer (``type``: a
    ``memoryType*`` value)."""

    def __init__(self, device, devicePointer, hostPointer, type=-1):
        self.type = type
        self.device = device
        self.devicePointer = devicePointer
        self.hostPointer = hostPointer


def pointerGetAttributes(ptr):
    """The attributes of address ``ptr``: the device an allocation of the
    model's devices lies on (type device or managed), pinned host memory
    (type host, device: the current one), or anything else: unregistered
    memory, device ``cudaInvalidDeviceId`` (-2), as CUDA 11+ answers for
    host memory it does not know."""
    dm, _ = _allocation_of(ptr)
    if dm is not None:
        host = ptr if dm.type == memoryTypeManaged else 0
        return PointerAttributes(dm.device_id, ptr, host, dm.type)
    if _pinned_range(ptr, 1):
        return PointerAttributes(runtime.getDevice(), ptr, ptr,
                                 memoryTypeHost)
    return PointerAttributes(runtime.cudaInvalidDeviceId, 0, ptr,
                             memoryTypeUnregistered)


def pointerGetMemoryType(ptr):
    """``pointerGetAttributes(ptr).type``."""
    return pointerGetAttributes(ptr).type


class BaseMemory:
    """Memory on a (virtual) device: ``ptr``, ``size``, ``device_id``.
    The base of every memory class, as in CuPy."""

    __slots__ = ()

    def __int__(self):
        """The pointer to the head of the allocation."""
        return self.ptr

    @property
    def device(self):
        return Device(self.device_id)


class _Region:
    """The bytes ``[ptr, ptr + size)`` of memory the model did not allocate
    for this object (what `UnownedMemory` views), as a buffer of its own;
    it is its own chunk (``mem``, ``offset``, ``size``), as a pool's block
    is, so that an array views it as it views a block."""

    __slots__ = ("buf", "size", "ptr")
    offset = 0

    def __init__(self, ptr, size):
        self.ptr, self.size = ptr, size
        self.buf = _view_of(ptr, size)

    @property
    def mem(self):
        return self


def _view_of(ptr, size):
    """The bytes at ``[ptr, ptr + size)`` as a NumPy array: a slice of the
    device allocation ``ptr`` lies in (up to its end at the most: an array
    that needs more is refused when it is made), or of pinned host memory.
    Memory of neither kind cannot be reached (on a GPU a kernel reading it
    fails with an illegal address): CUDARuntimeError."""
    if size == 0:
        return numpy.empty(0, numpy.uint8)
    dm, buf = _allocation_of(ptr)
    if dm is not None:             # to the allocation's end at the most
        return buf[ptr - dm.ptr:ptr - dm.ptr + size]
    if _pinned_range(ptr, size):
        return numpy.ctypeslib.as_array(
            (ctypes.c_ubyte * size).from_address(ptr))
    raise runtime._error(
        runtime.errorInvalidValue,
        f"[0x{ptr:x}, +{size}) is not inside memory of the CPU device "
        "model's devices (nor pinned host memory), so the model cannot "
        "reach it; hand over a pointer into an allocation of the model")


class UnownedMemory(BaseMemory):
    """Device memory that CuPy does not own (another library's): the
    ``owner`` object is kept to keep the memory alive.

    Args: ``ptr`` (the address), ``size`` (bytes), ``owner``, and
    ``device_id``: the device of the memory; -1 (default) asks the pointer's
    attributes (`pointerGetAttributes`), which a null pointer cannot
    answer (RuntimeError, as CuPy's). An array over it views the same
    bytes as the owner: nothing is copied.
    """

    __slots__ = ("size", "device_id", "ptr", "chunk", "_owner",
                 "__weakref__")

    def __init__(self, ptr, size, owner, device_id=-1):
        ptr, size = operator.index(ptr), operator.index(size)
        if size < 0:
            raise OverflowError("can't convert negative value to size_t")
        if device_id < 0:
            if ptr == 0:
                raise RuntimeError('UnownedMemory requires explicit'
                                   ' device ID for a null pointer.')
            device_id = pointerGetAttributes(ptr).device
            if device_id == runtime.cudaCpuDeviceId:
                device_id = runtime.getDevice()
        self.size = size
        self.device_id = device_id
        self.ptr = ptr
        self._owner = owner
        self.chunk = None           # its bytes, when an array views them

    def view(self):
        """Its bytes (`_Region`), found when an array first views them."""
        if self.chunk is None:
            self.chunk = _Region(self.ptr, self.size)
        return self.chunk


for _name in ("pointerGetAttributes", "pointerGetMemoryType",
              "PointerAttributes", "memoryTypeUnregistered", "memoryTypeHost",
              "memoryTypeDevice", "memoryTypeManaged"):
    setattr(runtime, _name, globals()[_name])
