"""Managed (unified) memory on the CPU device model: ``malloc_managed`` and
``ManagedMemory`` of ``cupy.cuda.memory``, and ``mallocManaged``,
``memPrefetchAsync`` and ``memAdvise`` of ``cupy.cuda.runtime``.

A managed allocation is bounded by the host's memory, not the device's:
it may be larger than the device (oversubscription, on a device whose
``concurrentManagedAccess`` is 1, as the H100's). Its pages live on one
side at a time. Pages are modelled in units of `PAGE` bytes:

* a kernel that touches pages resident on the host stalls while they
  migrate, at the profile's ``alloc.managed_fault_gbps``; pages never
  touched are made on the device, with nothing to move;
* the device holds at most its free memory (its capacity less what the
  pools hold) of one allocation's pages: beyond that, the least recently
  used pages go back to the host, at the same rate;
* ``memPrefetchAsync`` moves pages ahead of use on a stream, at the copy
  engines' rate (a bulk copy, no faults);
* ``memAdvise`` with ``cudaMemAdviseSetPreferredLocation`` to the host
  (``cudaCpuDeviceId``) keeps the pages there: kernels then read them over
  the link at the copy rate each time, without migrating them. Other
  advice is checked and kept, not modelled.

Not modelled: residency shared between allocations (each is held against
the device's free memory alone), host-side faults (CuPy's API reaches
managed memory from the host only through copies, which do not migrate),
pages finer than `PAGE`.
"""
import os
import threading

import numpy

from .. import _hardware
from .._hardware import api
from . import memory, runtime
from .allocator import _Raw
from .base_memory import memoryTypeManaged
from .device import _state
from .memory import MemoryPointer, _Device_Memory
from .handles import _queue_of_handle

PAGE = 2 << 20                      # modelled migration unit: 2 MiB

cudaMemAttachGlobal = 1
cudaMemAttachHost = 2
cudaMemAttachSingle = 4
cudaMemAdviseSetReadMostly = 1
cudaMemAdviseUnsetReadMostly = 2
cudaMemAdviseSetPreferredLocation = 3
cudaMemAdviseUnsetPreferredLocation = 4
cudaMemAdviseSetAccessedBy = 5
cudaMemAdviseUnsetAccessedBy = 6

_lock = threading.Lock()
_ranges = {}                        # ptr -> _Range, the live allocations
live = 0                            # how many: 0 keeps kernels' path short


def _host_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 62


class _Range:
    """One managed allocation: its buffer and where each page lives."""

    def __init__(self, size, device_id):
        self.mem = _Device_Memory(size, device_id, memoryTypeManaged)
        self.size, self.ptr, self.device_id = size, self.mem.ptr, device_id
        n = -(-size // PAGE)
        self.on_device = numpy.zeros(n, bool)
        self.touched = numpy.zeros(n, bool)
        self.last_use = numpy.zeros(n, numpy.int64)
        self.uses = 0
        self.advice = {}

    def pages(self, offset, nbytes):
        return slice(offset // PAGE, -(-(offset + nbytes) // PAGE))

    def room(self):
        """Pages of this allocation the device can hold now."""
        dev = _state(self.device_id)
        return max(0, (dev.capacity - dev.reserved) // PAGE)

    def touch(self, offset, nbytes):
        """A kernel touches these bytes: the bytes that move (in, and out
        to make room)."""
        sl = self.pages(offset, nbytes)
        if self.advice.get(cudaMemAdviseSetPreferredLocation) == \
                runtime.cudaCpuDeviceId:
            host = self.touched[sl] & ~self.on_device[sl]
            self.touched[sl] = True
            return 0, int(host.sum()) * PAGE     # read over the link
        moved = self._bring(sl)
        return moved, 0

    def _bring(self, sl):
        """Make these pages resident on the device, as a sweep over them
        would; the bytes that move."""
        idx = numpy.arange(len(self.on_device))[sl]
        if not len(idx):
            return 0
        room = self.room()
        keep = idx[-room:] if room else idx[:0]    # what stays at the end
        # pages with data on the host come in; in a sweep longer than the
        # device can hold, the first pages go out again to make room
        moved = PAGE * int((self.touched[idx] & ~self.on_device[idx]).sum())
        moved += PAGE * (len(idx) - len(keep))
        self.touched[idx] = True
        self.uses += 1
        self.on_device[idx] = False
        self.on_device[keep] = True
        self.last_use[keep] = self.uses
        over = int(self.on_device.sum()) - room
        if over > 0:                        # evict the least recently used
            resident = numpy.flatnonzero(self.on_device)
            resident = resident[~numpy.isin(resident, keep)]
            out = resident[numpy.argsort(self.last_use[resident])][:over]
            self.on_device[out] = False
            moved += PAGE * len(out)
        return moved

    def prefetch(self, offset, nbytes, to_device):
        """Move these pages to the device (or the host); bytes moved."""
        sl = self.pages(offset, nbytes)
        if to_device:
            return self._bring(sl)
        moved = int(self.on_device[sl].sum()) * PAGE
        self.on_device[sl] = False
        return moved


def _range_of(ptr):
    for r in list(_ranges.values()):
        if r.ptr <= ptr < r.ptr + max(r.size, 1):
            return r
    raise runtime.CUDARuntimeError(runtime.errorInvalidValue)


def touch(spans):
    """Seconds a kernel stalls on the managed memory among ``spans``
    (``(mem, ptr, nbytes)`` of its arrays): migrations at the fault rate,
    remote reads at the copy rate."""
    prof = _hardware.profile
    moved = remote = 0
    with _lock:
        for mem, ptr, nbytes in spans:
            r = getattr(mem, "_range", None)
            if r is None or not nbytes:
                continue
            m, rd = r.touch(ptr - r.ptr, nbytes)
            moved += m
            remote += rd
    return moved / prof.fault_bps + remote / prof.h2d_bps


# -- cupy.cuda.runtime ------------------------------------------------------
def mallocManaged(size, flags=cudaMemAttachGlobal):
    if flags not in (cudaMemAttachGlobal, cudaMemAttachHost) or size == 0:
        raise runtime.CUDARuntimeError(runtime.errorInvalidValue)
    if size > _host_memory():
        raise runtime.CUDARuntimeError(runtime.errorMemoryAllocation)
    global live
    device_id = runtime.getDevice()
    _state(device_id)
    r = _Range(size, device_id)
    _hardware.host_sleep(_hardware.profile.malloc_s)
    with _lock:
        _ranges[r.ptr] = r
        live += 1
    return r.ptr


def _free_managed(ptr):
    global live
    with _lock:
        if _ranges.pop(ptr, None) is not None:
            live -= 1


@api("copy")
def memPrefetchAsync(devPtr, count, dstDevice, stream):
    """Queue on ``stream`` (a handle) the move of these pages to device
    ``dstDevice`` or to the host (``cudaCpuDeviceId``)."""
    if dstDevice != runtime.cudaCpuDeviceId:
        runtime._check(dstDevice)
    q = _queue_of_handle(stream)
    with _lock:
        r = _range_of(devPtr)
        moved = r.prefetch(devPtr - r.ptr, count,
                           dstDevice != runtime.cudaCpuDeviceId)
    prof = _hardware.profile
    bps = prof.h2d_bps if dstDevice != runtime.cudaCpuDeviceId \
        else prof.d2h_bps
    engine = q.dev.h2d if dstDevice != runtime.cudaCpuDeviceId else q.dev.d2h
    q.submit(_noop, engine, cost=(prof.copy_latency_s, moved / bps),
             kind=_hardware.COPY)


def _noop():
    pass


def memAdvise(devPtr, count, advice, device):
    if not cudaMemAdviseSetReadMostly <= advice <= \
            cudaMemAdviseUnsetAccessedBy:
        raise runtime.CUDARuntimeError(runtime.errorInvalidValue)
    if device != runtime.cudaCpuDeviceId:
        runtime._check(device)
    with _lock:
        r = _range_of(devPtr)
        if advice % 2:                          # a Set advice
            r.advice[advice] = device
        else:
            r.advice.pop(advice - 1, None)


# -- cupy.cuda.memory -------------------------------------------------------
class ManagedMemory(_Raw):
    """Managed memory: one pointer for the device and the host, its pages
    migrating to the side that uses them."""

    __slots__ = ("size", "device_id", "ptr", "buf", "chunk", "_range",
                 "__weakref__")

    def __init__(self, size):
        device_id = runtime._tls.device
        self._range = None
        if size > 0:
            self._range = _ranges[mallocManaged(size)]
        self._own(size, device_id, self._range and self._range.mem)

    def prefetch(self, stream, *, device_id=runtime.cudaInvalidDeviceId):
        """Prefetch the memory to ``device_id`` (-1: the host; default: its
        own device) on ``stream``."""
        if device_id == runtime.cudaInvalidDeviceId:
            device_id = self.device_id
        memPrefetchAsync(self.ptr, self.size, device_id, stream.ptr)

    def advise(self, advise, dev):
        """Advise about the use of this memory by device ``dev``."""
        memAdvise(self.ptr, self.size, advise, dev.id)

    def __del__(self):
        if getattr(self, "ptr", 0):
            _free_managed(self.ptr)


@api("call")
def malloc_managed(size):
    """Allocate ``size`` bytes of managed memory."""
    return MemoryPointer(ManagedMemory(size), 0)


for _name in ("ManagedMemory", "malloc_managed"):
    setattr(memory, _name, globals()[_name])
for _name in ("mallocManaged", "memPrefetchAsync", "memAdvise",
              "cudaMemAttachGlobal", "cudaMemAttachHost",
              "cudaMemAttachSingle", "cudaMemAdviseSetReadMostly",
              "cudaMemAdviseUnsetReadMostly",
              "cudaMemAdviseSetPreferredLocation",
              "cudaMemAdviseUnsetPreferredLocation",
              "cudaMemAdviseSetAccessedBy", "cudaMemAdviseUnsetAccessedBy"):
    setattr(runtime, _name, globals()[_name])
