"""Page-locked ("pinned") host memory and its pool (``cupy.cuda.pinned_memory``).

A pinned allocation is an anonymous memory map that the model locks into RAM
with mlock(2) when the OS allows it (RLIMIT_MEMLOCK), and otherwise
pre-faults, so that allocating it costs what pinning costs. The model
remembers every pinned range: a copy from or to one is a single direct copy
that can run asynchronously; any other host memory is pageable and is
staged through a bounce buffer, as the CUDA driver does.
"""
import bisect
import ctypes
import mmap
import sys
import threading

_libc = ctypes.CDLL(None, use_errno=True)
_registry_lock = threading.Lock()
_starts = []           # sorted start addresses of live pinned allocations
_ends = {}             # start -> end
_pinned_bytes = [0]


class PinnedMemory:
    """One page-locked host allocation (cudaHostAlloc)."""

    def __init__(self, size, flags=0):
        self.size = size
        self.ptr = 0
        self.locked = False
        if size == 0:
            self._map = None
            return
        self._map = mmap.mmap(-1, size)
        self.ptr = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        if _libc.mlock(ctypes.c_void_p(self.ptr), ctypes.c_size_t(size)) == 0:
            self.locked = True
        else:                       # over RLIMIT_MEMLOCK: touch every page
            step = mmap.PAGESIZE
            view = memoryview(self._map)
            for off in range(0, size, step):
                view[off] = 0
            view.release()
        with _registry_lock:
            bisect.insort(_starts, self.ptr)
            _ends[self.ptr] = self.ptr + size
            _pinned_bytes[0] += size

    def _release(self):
        if self.ptr == 0:
            return
        with _registry_lock:
            _starts.pop(bisect.bisect_left(_starts, self.ptr))
            del _ends[self.ptr]
            _pinned_bytes[0] -= self.size
        if self.locked:
            _libc.munlock(ctypes.c_void_p(self.ptr),
                          ctypes.c_size_t(self.size))
        self.ptr = 0

    def __del__(self, is_shutting_down=sys.is_finalizing):
        if is_shutting_down():      # module globals may be gone, as in CuPy
            return
        self._release()

    def __int__(self):
        return self.ptr


class PinnedMemoryPointer:
    """A pointer into pinned memory; supports the buffer protocol.

    Concrete instances are ctypes byte arrays over the allocation (so that
    ``numpy.frombuffer(ptr, ...)`` works), with this class as a base.
    """

    def size(self):
        return len(self)

    def __int__(self):
        return self.ptr


_types = {}


def _pointer(mem, offset=0):
    n = mem.size - offset
    cls = _types.get(n)
    if cls is None:
        cls = _types[n] = type("PinnedMemoryPointer",
                               (ctypes.c_ubyte * n, PinnedMemoryPointer), {})
    if mem._map is None:
        p = cls()
    else:
        p = cls.from_buffer(mem._map, offset)
    p.mem = mem
    p.ptr = mem.ptr + offset
    return p


def is_memory_pinned(data):
    """True if the host address ``data`` lies in pinned memory."""
    with _registry_lock:
        i = bisect.bisect_right(_starts, data) - 1
        return i >= 0 and data < _ends[_starts[i]]


def _pinned_range(ptr, nbytes):
    """True if ``[ptr, ptr + nbytes)`` lies inside one pinned allocation."""
    with _registry_lock:
        i = bisect.bisect_right(_starts, ptr) - 1
        return i >= 0 and ptr + nbytes <= _ends[_starts[i]]


def _clp2(x):
    return 1 << (x - 1).bit_length() if x > 1 else x


class _PooledPinnedMemory:
    """A pooled block in use; returns to the pool when garbage-collected."""

    def __init__(self, mem, pool):
        self._mem, self._pool = mem, pool
        self.size, self.ptr, self._map = mem.size, mem.ptr, mem._map

    def __del__(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            pool._free(self._mem)


class PinnedMemoryPool:
    """Pool of pinned blocks, sizes rounded to a power of two of 512 bytes."""

    _allocation_unit_size = 512

    def __init__(self, allocator=None):
        self._free_lists = {}
        self._lock = threading.Lock()

    def malloc(self, size):
        if size == 0:
            return _pointer(PinnedMemory(0))
        unit = self._allocation_unit_size
        size = _clp2((size + unit - 1) // unit * unit)
        with self._lock:
            free = self._free_lists.get(size)
            mem = free.pop() if free else PinnedMemory(size)
        return _pointer(_PooledPinnedMemory(mem, self))

    def _free(self, mem):
        with self._lock:
            self._free_lists.setdefault(mem.size, []).append(mem)

    def free_all_blocks(self):
        with self._lock:
            lists, self._free_lists = self._free_lists, {}
        for free in lists.values():
            for mem in free:
                mem._release()

    def n_free_blocks(self):
        with self._lock:
            return sum(len(v) for v in self._free_lists.values())


_default_pool = PinnedMemoryPool()


def get_default_pinned_memory_pool():
    return _default_pool


def alloc_pinned_memory(size):
    """Allocate ``size`` bytes of pinned host memory from the pinned pool."""
    return _default_pool.malloc(size)


def _pinned_bytes_in_use():
    """Bytes of host memory the model holds pinned (pooled or in use)."""
    return _pinned_bytes[0]
