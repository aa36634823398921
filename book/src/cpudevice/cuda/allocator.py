"""CuPy's current allocator and its memory without a pool, on the CPU model.

As in ``cupy/cuda/memory.pyx``: every new array takes its memory from the
current allocator (`get_allocator`), which is the default memory pool's
``malloc`` until `set_allocator` changes it; a thread may use another one
for a while (`using_allocator`, in ``cupy.cuda``). ``set_allocator(None)``
means no pool: `_malloc` takes each block from the device (cudaMalloc,
`Memory`) and gives it back when the block is freed (cudaFree).

On a GPU cudaMalloc and cudaFree are slow, and they synchronize: "Managing
memory allocations using cudaMalloc and cudaFree causes the GPU to
synchronize across all executing CUDA streams" (CUDA Programming Guide,
4.3.1). So here each waits for the device's work (as
``cudaDeviceSynchronize`` would, on the device clock), and cudaMalloc then
costs the host the profile's ``alloc.malloc_us``. A pool's hit costs
nothing but CuPy's issue time, which the profile's ``issue_us`` holds.

The names this module defines in ``cupy.cuda.memory`` are set there too
(`memory` is below this module: it cannot import them).
"""
import contextlib
import threading

from .. import _hardware
from .._hardware import api
from . import memory, runtime
from .device import _state
from .memory import BaseMemory, MemoryPointer, _Chunk, _Device_Memory


def _worker_or_capturing(dev):
    """True on a stream's worker thread (a block freed when its last work
    has run) or while a stream of the device captures: no host wait then."""
    me = threading.current_thread()
    return any(q.thread is me or q.capture is not None
               for q in dev.queues())


def _synchronize(dev):
    """Wait, as cudaMalloc and cudaFree do, until the device's work queued
    so far has run (its errors stay for the next synchronization)."""
    if _worker_or_capturing(dev):
        return
    for q in dev.queues():
        item = q.last
        if item is None:
            continue
        since = _hardware.host_now()
        q.wait_done(item.seq)
        if item.end is not None:
            _hardware.host_wait_until(item.end, since, item.lag)


class _Raw(BaseMemory):
    """Memory of its own (not a pool's block): the buffer is a chunk that
    starts at 0, so an array views it as it views a pool's block."""

    __slots__ = ()

    def _own(self, size, device_id, dm=None):
        """Hold ``dm`` (a `_Device_Memory`; None: a new one of ``size``)."""
        self.size, self.device_id = size, device_id
        if dm is None:
            dm = _Device_Memory(size, device_id)
        self.buf = dm.buf
        self.ptr = dm.ptr if size else 0
        self.chunk = _Chunk(dm, 0, size, None)


class Memory(_Raw):
    """Device memory of its own, taken by cudaMalloc and given back by
    cudaFree when the object is freed."""

    __slots__ = ("size", "device_id", "buf", "ptr", "chunk", "_held",
                 "__weakref__")

    def __init__(self, size):
        device_id = runtime._tls.device
        dev = _state(device_id)
        self._held = 0
        if size > 0:
            _synchronize(dev)
            if not dev.reserve(size):
                raise runtime.CUDARuntimeError(runtime.errorMemoryAllocation)
            self._held = size
            _hardware.host_sleep(_hardware.profile.malloc_s)
        self._own(size, device_id)

    def __del__(self):
        held, self._held = getattr(self, "_held", 0), 0
        if held:
            dev = _state(self.device_id)
            _synchronize(dev)
            _hardware.host_sleep(_hardware.profile.free_s)
            dev.release(held)


def _malloc(size):
    """A block of its own, with no pool (what ``set_allocator(None)``
    makes the allocator)."""
    return MemoryPointer(Memory(size), 0)


# -- the current allocator ---------------------------------------------------
class _AllocatorTLS(threading.local):
    allocator = None            # `using_allocator`'s, on this thread


_tls = _AllocatorTLS()
_current = memory.get_default_memory_pool().malloc


def get_allocator():
    """The current allocator: this thread's (`using_allocator`), else the
    global one."""
    return _tls.allocator or _current


def set_allocator(allocator=None):
    """Make ``allocator`` (a function of a size that returns a
    `MemoryPointer`) the current one; ``None``: no pool (`_malloc`)."""
    global _current
    if allocator is None:
        allocator = _malloc
    if _tls.allocator is not None:
        raise ValueError("Can't change the global allocator inside "
                         "`using_allocator` context manager")
    _current = allocator


@contextlib.contextmanager
def using_allocator(allocator=None):
    """Use ``allocator`` on this thread inside the ``with`` block
    (``None``: no pool)."""
    if allocator is None:
        allocator = _malloc
    previous = _tls.allocator
    _tls.allocator = allocator
    try:
        yield
    finally:
        _tls.allocator = previous


@api("call")
def alloc(size):
    """Allocate ``size`` bytes of device memory with the current
    allocator."""
    return get_allocator()(size)


for _name in ("Memory", "_malloc", "get_allocator", "set_allocator",
              "alloc"):
    setattr(memory, _name, globals()[_name])
