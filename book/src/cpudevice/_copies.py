"""Host<->device copies of the CPU device model: through the copy engines,
from pinned memory directly, and from pageable memory through the driver's
staging buffers (as ``cudaMemcpyAsync`` does).

Also the raw copies and fills of ``cupy.cuda.MemoryPointer``
(``copy_from*``, ``copy_to_host*``, ``memset*``), which this module adds to
the class (`cuda.memory` stands below it): a host side given as an address
is viewed in place, and each copy goes the way an array's does.
"""
import ctypes
import operator
import threading

import numpy

from . import _hardware
from ._core import _launch
from ._hardware import api
from .cuda import runtime
from .cuda.memory import MemoryPointer
from .cuda.pinned_memory import _pinned_range
from .cuda.stream import Stream, _queue_of, get_current_stream


# -- host <-> device copies ---------------------------------------------------
class _Staging:
    """The driver's bounce buffers for copies from and to pageable memory.

    Like a driver's pinned staging buffers they are kept and reused: a copy
    takes the smallest free buffer that fits, and a buffer given back stays
    unless the kept buffers would pass ``KEEP_BYTES``, when the smallest go
    first, and no more than ``KEEP`` are kept. (Keeping the small ones
    instead would make every large copy write into fresh pages, a cost no
    GPU driver has.)

    Host threads (uploads) and stream workers (downloads) take and give
    buffers at once: the free list is guarded by a lock, or two threads
    could find the same buffer and one pop another's."""

    KEEP, KEEP_BYTES = 4, 512 * 2**20

    def __init__(self):
        self.free = []              # ascending by size
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
            while len(self.free) > self.KEEP or (
                    len(self.free) > 1 and
                    sum(b.nbytes for b in self.free) > self.KEEP_BYTES):
                del self.free[0]


_staging = _Staging()

_PIECE = 1 << 20


def _copy(dst, src):
    """``numpy.copyto(dst, src)``, the real work of a host<->device copy.

    A large copy between buffers whose addresses differ by other than a
    multiple of 64 bytes (a NumPy array from ``malloc`` is 16 bytes past a
    cache line, the model's device memory is 256-byte aligned, as
    cudaMalloc's) is done in 1 MiB pieces: in one call, glibc's ``memcpy``
    takes its non-temporal path for large copies, which runs several times
    slower when source and destination are not aligned alike (66 ms against
    16 for 256 MiB on the machine this was measured on; 33 ms in pieces).
    It changes how long the model's real work takes, never what it does."""
    if (dst.nbytes < 2 * _PIECE or src.shape != dst.shape
            or src.dtype != dst.dtype or not dst.flags.c_contiguous
            or not src.flags.c_contiguous
            or (dst.ctypes.data - src.ctypes.data) % 64 == 0):
        numpy.copyto(dst, src)
        return
    d, s = dst.reshape(-1).view(numpy.uint8), src.reshape(-1).view(numpy.uint8)
    for i in range(0, d.size, _PIECE):
        numpy.copyto(d[i:i + _PIECE], s[i:i + _PIECE])


def _as_bytes_view(buf, like):
    return buf[:like.nbytes].view(like.dtype).reshape(like.shape)


def _stage(nbytes):
    """The host has staged ``nbytes`` of pageable memory: it is held at
    least as long as the profile says staging takes, and its view of the
    device clock counts exactly that (`_clock.host_sleep`)."""
    _hardware.host_sleep(_hardware.profile.stage_cost(nbytes))


def _begin_copy(stream, nbytes, direction):
    """``(queue, cost)`` of a copy of ``nbytes`` in ``direction`` ("H2D",
    "D2H") on ``stream``; a stream under capture refuses it, as CuPy's."""
    q = _queue_of(stream)
    if q.capture is not None:
        raise RuntimeError(f"the current stream is capturing, so "
                           f"{direction} transfers are disallowed")
    return q, _hardware.profile.copy_cost(nbytes, direction)


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
    q, cost = _begin_copy(stream, src.nbytes, "H2D")
    if _pinned_range(src.ctypes.data, src.nbytes):
        return q.submit(lambda: _copy(dst, src), q.dev.h2d,
                        cost=cost)
    if sync:
        # The host is held until the copy is done, so ``src`` cannot change
        # meanwhile: one real copy stands for the staging and the DMA,
        # while the device clock counts both, one after the other.
        staged = (_hardware.host_now() +
                  _hardware.profile.stage_cost(src.nbytes))
        item = q.submit(lambda: _copy(dst, src), q.dev.h2d,
                        cost=cost, issued=staged)
        q.host_wait(item)
        return item
    buf = _staging.take(src.nbytes)
    stage = _as_bytes_view(buf, src)
    _copy(stage, src)
    _stage(src.nbytes)

    def copy():
        _copy(dst, stage)
        _staging.give(buf)
    return q.submit(copy, q.dev.h2d, cost=cost)


def _d2h(out, src, stream=None, blocking=True):
    """Copy device view ``src`` into host array ``out`` on ``stream``.

    Into pinned memory the copy may stay asynchronous (``blocking=False``);
    into pageable memory it goes through a bounce buffer and the call
    returns only when the data has arrived, as cudaMemcpyAsync does.
    """
    q, cost = _begin_copy(stream, out.nbytes, "D2H")
    if _pinned_range(out.ctypes.data, out.nbytes):
        item = q.submit(lambda: _copy(out, src), q.dev.d2h,
                        cost=cost)
        if blocking:
            q.host_wait(item)
        return out
    buf = _staging.take(out.nbytes)
    stage = _as_bytes_view(buf, out)
    q.host_wait(q.submit(lambda: _copy(stage, src), q.dev.d2h,
                         cost=cost))
    _copy(out, stage)
    _staging.give(buf)
    _stage(out.nbytes)
    return out


# -- MemoryPointer's raw copies and fills -------------------------------------
def _size(size):
    """``size`` as CuPy's ``size_t`` parameter takes it."""
    size = operator.index(size)
    if size < 0:
        raise OverflowError("can't convert negative value to size_t")
    return size


def _device_bytes(memptr, size):
    """The ``size`` bytes at ``memptr`` (a view of its memory); a range that
    runs past the allocation is cudaErrorInvalidValue."""
    buf = memptr._buffer
    if size > buf.size:
        raise runtime._error(
            runtime.errorInvalidValue,
            f"{size} bytes from 0x{memptr.ptr:x} run past the end of its "
            f"memory ({buf.size} bytes from there)")
    return buf[:size]


def _host_bytes(mem, size):
    """The ``size`` bytes of host memory at ``mem`` (an int address or a
    ``ctypes.c_void_p``), viewed in place."""
    ptr = mem if isinstance(mem, int) else mem.value
    return numpy.ctypeslib.as_array((ctypes.c_ubyte * size).from_address(ptr))


def _legacy(what="synchronous API calls"):
    """The legacy null stream, where CuPy's synchronous copies and fills
    go; refused while the current stream captures, as CuPy refuses it."""
    if _queue_of(None).capture is not None:
        raise RuntimeError(f"the current stream is capturing, so {what} "
                           "are disallowed")
    return Stream.null


def _stream_or_current(stream):
    return get_current_stream() if stream is None else stream


def _d2d(dst, src, size, stream):
    """Queue a device-to-device copy of ``size`` bytes: a kernel that reads
    and writes them (as ``ndarray.copy`` is)."""
    d, s = _device_bytes(dst, size), _device_bytes(src, size)
    _launch(lambda: numpy.copyto(d, s), 2 * size, stream=stream)


def _fill(dst, value, size, stream):
    d = _device_bytes(dst, size)
    byte = operator.index(value) & 0xFF     # cudaMemset sets unsigned chars
    _launch(lambda: d.fill(byte), size, stream=stream)


@api("launch")
def copy_from_device(self, src, size):
    """Copy ``size`` bytes from device pointer ``src``, on the legacy null
    stream (as CuPy's, whatever the current stream: use
    ``copy_from_device_async`` with streams). The host does not wait."""
    size = _size(size)
    stream = _legacy()
    if size > 0:
        _d2d(self, src, size, stream)


@api("launch")
def copy_from_device_async(self, src, size, stream=None):
    """Copy ``size`` bytes from device pointer ``src`` on ``stream``
    (default: the current one); it can be captured into a graph."""
    size = _size(size)
    if size > 0:
        _d2d(self, src, size, _stream_or_current(stream))


@api("copy")
def copy_from_host(self, mem, size):
    """Copy ``size`` bytes from host address ``mem`` (int or
    ``ctypes.c_void_p``), on the legacy null stream; the host waits for the
    copy (cudaMemcpy)."""
    size = _size(size)
    stream = _legacy()
    if size > 0:
        _h2d(_device_bytes(self, size), _host_bytes(mem, size), stream)


@api("copy")
def copy_from_host_async(self, mem, size, stream=None):
    """Copy ``size`` bytes from host address ``mem`` on ``stream`` (default:
    the current one): from pinned memory asynchronously, from pageable
    memory the host waits, as ``ndarray.set`` (cudaMemcpyAsync)."""
    size = _size(size)
    stream = _stream_or_current(stream)
    if size > 0:
        _h2d(_device_bytes(self, size), _host_bytes(mem, size), stream)
    else:
        _begin_copy(stream, 0, "H2D")


def copy_from(self, mem, size):
    """``copy_from_device`` for a `MemoryPointer`, else
    ``copy_from_host``."""
    if isinstance(mem, MemoryPointer):
        self.copy_from_device(mem, size)
    else:
        self.copy_from_host(mem, size)


def copy_from_async(self, mem, size, stream=None):
    """``copy_from_device_async`` for a `MemoryPointer`, else
    ``copy_from_host_async``."""
    if isinstance(mem, MemoryPointer):
        self.copy_from_device_async(mem, size, stream)
    else:
        self.copy_from_host_async(mem, size, stream)


@api("copy")
def copy_to_host(self, mem, size):
    """Copy ``size`` bytes to host address ``mem``, on the legacy null
    stream; returns once they have arrived."""
    size = _size(size)
    stream = _legacy()
    if size > 0:
        _d2h(_host_bytes(mem, size), _device_bytes(self, size), stream)


@api("copy")
def copy_to_host_async(self, mem, size, stream=None):
    """Copy ``size`` bytes to host address ``mem`` on ``stream`` (default:
    the current one): into pinned memory asynchronously (synchronize the
    stream before reading it), into pageable memory the host waits."""
    size = _size(size)
    stream = _stream_or_current(stream)
    if size > 0:
        _d2h(_host_bytes(mem, size), _device_bytes(self, size), stream,
             blocking=False)
    else:
        _begin_copy(stream, 0, "D2H")


@api("launch")
def memset(self, value, size):
    """Set ``size`` bytes to ``value`` (its low byte, as cudaMemset), on
    the legacy null stream; the host does not wait."""
    size = _size(size)
    stream = _legacy()
    if size > 0:
        _fill(self, value, size, stream)


@api("launch")
def memset_async(self, value, size, stream=None):
    """``memset`` on ``stream`` (default: the current one)."""
    size = _size(size)
    if size > 0:
        _fill(self, value, size, _stream_or_current(stream))


for _f in (copy_from_device, copy_from_device_async, copy_from_host,
           copy_from_host_async, copy_from, copy_from_async, copy_to_host,
           copy_to_host_async, memset, memset_async):
    setattr(MemoryPointer, _f.__name__, _f)
