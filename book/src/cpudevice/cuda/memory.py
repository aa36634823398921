"""The device memory pool (``cupy.cuda.memory``).

Like CuPy's pool: sizes round up to 512 bytes, and every allocation starts
on a 256-byte boundary, as cudaMalloc's do; freed blocks stay cached in
the arena of the stream they were allocated on and are reused (best fit,
split and merged) by later allocations on that stream; when the device or
the limit is exhausted the pool frees its cached blocks, collects garbage
and retries before raising ``OutOfMemoryError``. Device memory is real
memory: each block is a NumPy byte buffer (`base_memory._Device_Memory`).
"""
import bisect
import gc
import operator
import threading

from . import runtime
from .._errors import reader_traceback
from .._hardware import api
from .base_memory import (  # noqa: F401  (cupy.cuda.memory's names)
    BaseMemory, UnownedMemory, _Device_Memory)
from .device import Device, _state
from .memory_hook import _hooks
from .memory_hook import _tls as _hook_tls
from .stream import _current_stream_ptr

_UNIT = 512


def _round_size(size):
    return (size + _UNIT - 1) // _UNIT * _UNIT


class OutOfMemoryError(MemoryError):
    """Out-of-memory error, with CuPy's message, word for word."""

    def __init__(self, size, total, limit=0):
        self._size, self._total, self._limit = size, total, limit
        if limit == 0:
            msg = "Out of memory allocating {:,} bytes".format(size)
            if total != -1:
                msg += " (allocated so far: {:,} bytes).".format(total)
        else:
            msg = ("Out of memory allocating {:,} bytes "
                   "(allocated so far: {:,} bytes, "
                   "limit set to: {:,} bytes).".format(size, total, limit))
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self._size, self._total, self._limit))

    _render_traceback_ = reader_traceback     # the reader's lines, message


class _Owned:
    """A block a pool's allocator gave (``MemoryPool(allocator=...)``): the
    pool keeps it, and frees it by dropping it."""

    __slots__ = ("owner", "buf", "size", "ptr", "device_id")

    def __init__(self, mem):
        chunk = mem.chunk
        self.owner, self.size = mem, mem.size
        self.buf = chunk.mem.buf[chunk.offset:chunk.offset + mem.size]
        self.ptr, self.device_id = mem.ptr, mem.device_id


class _Chunk:
    __slots__ = ("mem", "offset", "size", "prev", "next", "free", "arena")

    def __init__(self, mem, offset, size, arena):
        self.mem, self.offset, self.size = mem, offset, size
        self.prev = self.next = None
        self.free = False
        self.arena = arena


class _Arena:
    """Free chunks of one stream, indexed by size for best fit."""

    def __init__(self):
        self.by_size = {}
        self.sizes = []

    def insert(self, chunk):
        chunk.free = True
        lst = self.by_size.get(chunk.size)
        if lst is None:
            lst = self.by_size[chunk.size] = []
            bisect.insort(self.sizes, chunk.size)
        lst.append(chunk)

    def remove(self, chunk):
        chunk.free = False
        lst = self.by_size[chunk.size]
        lst.remove(chunk)
        if not lst:
            del self.by_size[chunk.size]
            self.sizes.pop(bisect.bisect_left(self.sizes, chunk.size))

    def take(self, size):
        """The smallest free chunk of ``size`` or more, split to ``size``."""
        sizes = self.sizes
        i = bisect.bisect_left(sizes, size)
        if i == len(sizes):
            return None
        lst = self.by_size[sizes[i]]
        chunk = lst.pop()               # `remove` of the last, inline
        chunk.free = False
        if not lst:
            del self.by_size[sizes[i]], sizes[i]
        if chunk.size == size:                      # an exact fit: no split
            return chunk
        # ``sizes`` holds only sizes with a free chunk (remove() drops a
        # size whose list empties), and bisect gave the first >= size, so
        # here the chunk is strictly larger and the rest is never empty.
        rest = _Chunk(chunk.mem, chunk.offset + size, chunk.size - size, self)
        rest.prev, rest.next = chunk, chunk.next
        if chunk.next is not None:
            chunk.next.prev = rest
        chunk.next = rest
        chunk.size = size
        self.insert(rest)
        return chunk

    def n_blocks(self):
        return sum(len(v) for v in self.by_size.values())


class _PooledMemory(BaseMemory):
    """A block in use; returns to its arena when garbage-collected."""

    __slots__ = ("chunk", "pool", "size", "ptr", "device_id", "__weakref__")

    def __init__(self, chunk, pool):
        self.chunk, self.pool = chunk, pool
        self.size = chunk.size
        self.ptr = chunk.mem.ptr + chunk.offset
        self.device_id = chunk.mem.device_id

    # Returning a block costs the host's view of the device clock nothing:
    # CuPy's free is part of the calls the profile prices (its launch cost
    # is a whole `x + x`, the result's free included), so the model's own
    # Python here must not count again ("free" has no issue time).
    @api("free")
    def __del__(self):
        pool, self.pool = self.pool, None
        if pool is None:
            return
        hooks = _hook_tls.hooks         # `_hooks()`, inline: the hot path
        if hooks:
            kw = dict(device_id=self.device_id, mem_size=self.size,
                      mem_ptr=self.ptr, pmem_id=id(self))
            for h in list(hooks.values()):
                h.free_preprocess(**kw)
            pool._free(self.chunk)
            for h in list(hooks.values()):
                h.free_postprocess(**kw)
        else:
            pool._free(self.chunk)


class MemoryPointer:
    """A pointer into device memory: ``mem`` plus a byte ``offset``."""

    __slots__ = ("mem", "ptr", "device_id", "__weakref__")

    def __init__(self, mem, offset):
        assert mem.ptr != 0 or offset == 0
        self.mem = mem
        self.ptr = mem.ptr + offset
        self.device_id = mem.device_id

    def __int__(self):
        """The pointer value."""
        return self.ptr

    def __repr__(self):
        return "<{} 0x{:x} device={} mem={!r}>".format(
            type(self).__name__, self.ptr, self.device_id, self.mem)

    @property
    def device(self):
        return Device(self.device_id)

    def __add__(self, offset):
        """The pointer ``offset`` bytes further, into the same memory."""
        offset = operator.index(offset)
        assert self.ptr != 0 or offset == 0
        return MemoryPointer(self.mem, self.ptr - self.mem.ptr + offset)

    __radd__ = __add__

    def __iadd__(self, offset):
        offset = operator.index(offset)
        assert self.ptr != 0 or offset == 0
        self.ptr += offset
        return self

    def __sub__(self, offset):
        return self + -operator.index(offset)

    def __isub__(self, offset):
        return self.__iadd__(-operator.index(offset))

    @property
    def _buffer(self):
        """The bytes of the block as a NumPy array (model-internal)."""
        chunk = self.mem.chunk
        if chunk is None:                   # an UnownedMemory not viewed yet
            chunk = self.mem.view()
        off = self.ptr - chunk.mem.ptr
        return chunk.mem.buf[off:chunk.offset + chunk.size]


class _ZeroMemory(BaseMemory):
    size = 0
    ptr = 0

    def __init__(self, device_id):
        self.device_id = device_id
        self.chunk = _Chunk(_Device_Memory(0, device_id), 0, 0, None)


def _limit_bytes(size, fraction, total):
    """A pool's ``set_limit(size, fraction)`` in bytes, with CuPy's checks
    (``fraction`` of the device's ``total``; nothing given: 0)."""
    if size is None:
        if fraction is None:
            return 0
        if not 0 <= fraction <= 1:
            raise ValueError(
                "memory limit fraction out of range: {}".format(fraction))
        return _limit_bytes(fraction * total, None, total)
    if fraction is not None:
        raise ValueError("size and fraction cannot be specified at "
                         "one time")
    if size < 0:
        raise ValueError("memory limit size out of range: {}".format(size))
    return int(size)


class SingleDeviceMemoryPool:
    """The pool of one device."""

    def __init__(self, device_id, allocator=None):
        self._device_id = device_id
        self._allocator = allocator     # None: the device's own (cudaMalloc)
        self._lock = threading.RLock()
        self._arenas = {}
        self._in_use = 0
        self._total = 0
        self._limit = 0

    def _arena(self, stream_ptr):
        a = self._arenas.get(stream_ptr)
        if a is None:
            a = self._arenas[stream_ptr] = _Arena()
        return a

    def malloc(self, size):
        rounded = (size + _UNIT - 1) // _UNIT * _UNIT   # `_round_size`
        hooks = _hook_tls.hooks         # `_hooks()`, inline: the hot path
        if not hooks:
            return self._malloc(rounded)
        memptr = None
        dev = self._device_id
        for h in list(hooks.values()):
            h.malloc_preprocess(device_id=dev, size=size, mem_size=rounded)
        try:
            memptr = self._malloc(rounded)
        finally:
            mem_ptr = memptr.ptr if memptr is not None else 0
            pmem_id = id(memptr.mem) if memptr is not None else 0
            for h in list(hooks.values()):
                h.malloc_postprocess(device_id=dev, size=size,
                                     mem_size=rounded, mem_ptr=mem_ptr,
                                     pmem_id=pmem_id)
        return memptr

    def _malloc(self, size):
        if size == 0:
            return MemoryPointer(_ZeroMemory(self._device_id), 0)
        stream_ptr = _current_stream_ptr(self._device_id)
        with self._lock:
            arena = self._arenas.get(stream_ptr) or self._arena(stream_ptr)
            chunk = arena.take(size)
            if chunk is None:
                mem = self._try_malloc(size)
                chunk = _Chunk(mem, 0, size, arena)
            self._in_use += chunk.size
        return MemoryPointer(_PooledMemory(chunk, self), 0)

    def _alloc(self, size):
        """Take ``size`` bytes from the device (cudaMalloc), or from the
        pool's allocator; None if full."""
        allocator = self._allocator
        if allocator is None and not _state(self._device_id).reserve(size):
            return None
        hooks = _hooks()
        if hooks:
            for h in list(hooks.values()):
                h.alloc_preprocess(device_id=self._device_id, mem_size=size)
        if allocator is None:
            mem = _Device_Memory(size, self._device_id)
        else:
            try:
                mem = _Owned(allocator(size).mem)
            except runtime.CUDARuntimeError as e:
                if e.status != runtime.errorMemoryAllocation:
                    raise
                return None
        if hooks:
            for h in list(hooks.values()):
                h.alloc_postprocess(device_id=self._device_id, mem_size=size,
                                    mem_ptr=mem.ptr)
        return mem

    def _try_malloc(self, size):
        limit = self._limit
        for attempt in range(3):
            if not limit or self._total + size <= limit:
                mem = self._alloc(size)
                if mem is not None:
                    self._total += size
                    return mem
            if attempt == 1:
                gc.collect()
            self.free_all_blocks()
        raise OutOfMemoryError(size, self._total, limit)

    def _free(self, chunk):
        with self._lock:
            self._in_use -= chunk.size
            arena = chunk.arena
            for nb in (chunk.prev, chunk.next):
                if nb is not None and nb.free and nb.arena is arena:
                    arena.remove(nb)
                    first, second = (nb, chunk) if nb is chunk.prev \
                        else (chunk, nb)
                    first.size += second.size
                    first.next = second.next
                    if second.next is not None:
                        second.next.prev = first
                    chunk = first
            arena.insert(chunk)

    def free_all_blocks(self, stream=None):
        """Return every cached block that is a whole allocation to the device."""
        with self._lock:
            arenas = (self._arenas.values() if stream is None
                      else [self._arenas.get(stream.ptr, _Arena())])
            dev = _state(self._device_id)
            for arena in arenas:
                for size in list(arena.sizes):
                    for chunk in list(arena.by_size.get(size, ())):
                        if chunk.prev is None and chunk.next is None:
                            arena.remove(chunk)
                            self._total -= chunk.size
                            if self._allocator is None:
                                dev.release(chunk.size)

    def n_free_blocks(self):
        with self._lock:
            return sum(a.n_blocks() for a in self._arenas.values())

    def used_bytes(self):
        return self._in_use

    def free_bytes(self):
        return self._total - self._in_use

    def total_bytes(self):
        return self._total

    def set_limit(self, size=None, fraction=None):
        self._limit = _limit_bytes(size, fraction,
                                   _state(self._device_id).capacity)

    def get_limit(self):
        return self._limit


class MemoryPool:
    """The memory pool of all devices; each call acts on the current device."""

    def __init__(self, allocator=None):
        self._allocator = allocator     # None: cudaMalloc (CuPy's _malloc)
        self._pools = {}
        self._lock = threading.Lock()

    def _pool(self):
        dev = runtime._tls.device
        p = self._pools.get(dev)
        if p is None:
            with self._lock:
                p = self._pools.setdefault(
                    dev, SingleDeviceMemoryPool(dev, self._allocator))
        return p

    def malloc(self, size):
        pool = self._pools.get(runtime._tls.device)
        return (pool or self._pool()).malloc(size)

    def free_all_blocks(self, stream=None):
        self._pool().free_all_blocks(stream)

    def n_free_blocks(self):
        return self._pool().n_free_blocks()

    def used_bytes(self):
        return self._pool().used_bytes()

    def free_bytes(self):
        return self._pool().free_bytes()

    def total_bytes(self):
        return self._pool().total_bytes()

    def set_limit(self, size=None, fraction=None):
        self._pool().set_limit(size=size, fraction=fraction)

    def get_limit(self):
        return self._pool().get_limit()


_default_pool = MemoryPool()


def get_default_memory_pool():
    return _default_pool


def alloc(size):
    """Allocate ``size`` bytes of device memory from the default pool."""
    return _default_pool.malloc(size)
