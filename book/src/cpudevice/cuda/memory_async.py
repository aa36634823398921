"""The stream-ordered allocator (cudaMallocAsync) on the CPU device model:
``malloc_async``, ``MemoryAsync`` and ``MemoryAsyncPool`` of
``cupy.cuda.memory``, and the runtime calls under them (``mallocAsync``,
``freeAsync``, ``deviceGetMemPool``, ``memPool*``).

Each device has one pool (CUDA's default one, `_Pool`). A free is ordered
on its stream (CUDA Programming Guide, 4.3): its block is free once the
work queued on that stream before it has run. The pool reuses a block:

* at once on the stream it was freed on (stream order protects it);
* on another stream only once that free has run (opportunistic reuse);
* else, when the device has no room for a new block, with the
  dependency it needs (cudaMemPoolReuseAllowInternalDependencies): the
  allocating stream waits for the free.

So a block freed on one stream is never handed to another stream before
the first stream's work is done, unless the streams are ordered. Memory
the pool holds beyond its release threshold (cudaMemPoolAttrReleaseThreshold,
0 in CUDA; CuPy's ``MemoryAsyncPool`` sets it to UINT64_MAX, "never
shrink") goes back to the device at the next synchronization of a stream,
an event or the device, as on a GPU; ``free_all_blocks`` trims it all.

Not modelled: sub-allocation (a block is reused whole, for a request of
its size down to half of it), pools other than the default, IPC.
"""
import os
import threading
import weakref

from .. import _hardware
from .._hardware import api
from . import memory, runtime
from .allocator import _Raw
from .device import _state
from .memory import MemoryPointer, OutOfMemoryError, _Device_Memory
from .memory import _limit_bytes, _round_size
from .handles import _queue_of_handle
from .stream import _queue_of, get_current_stream

UINT64_MAX = 2 ** 64 - 1
_HANDLE = 0x7E000000                # the default pool's handle: + device id

cudaMemPoolReuseFollowEventDependencies = 1
cudaMemPoolReuseAllowOpportunistic = 2
cudaMemPoolReuseAllowInternalDependencies = 3
cudaMemPoolAttrReleaseThreshold = 4
cudaMemPoolAttrReservedMemCurrent = 5
cudaMemPoolAttrReservedMemHigh = 6
cudaMemPoolAttrUsedMemCurrent = 7
cudaMemPoolAttrUsedMemHigh = 8


class _Block:
    __slots__ = ("mem", "size", "ptr", "queue", "free_item")

    def __init__(self, size, device_id):
        self.mem = _Device_Memory(size, device_id)
        self.size, self.ptr = size, self.mem.ptr
        self.queue = self.free_item = None

    def free_done(self):
        """The work queued before its free has run."""
        item = self.free_item
        return item is None or item.q.completed >= item.seq


class _Pool:
    """CUDA's default memory pool of one device."""

    def __init__(self, device_id):
        self.device_id = device_id
        self.handle = _HANDLE + device_id
        self.lock = threading.Lock()
        self.free = []                  # freed blocks, oldest first
        self.live = {}                  # ptr -> block in use
        self.reserved = self.used = 0
        self.attrs = {cudaMemPoolReuseFollowEventDependencies: 1,
                      cudaMemPoolReuseAllowOpportunistic: 1,
                      cudaMemPoolReuseAllowInternalDependencies: 1,
                      cudaMemPoolAttrReleaseThreshold: 0,
                      cudaMemPoolAttrReservedMemHigh: 0,
                      cudaMemPoolAttrUsedMemHigh: 0}
        _state(device_id).sync_hooks.append(self.release_above_threshold)

    def _take(self, size, q):
        """A free block for ``size`` bytes on ``q``, and the free it must
        wait for (None: none); (None, None) if none may be reused now."""
        fits = [b for b in self.free if size <= b.size < 2 * size]
        for b in fits:
            if b.queue is q:
                return b, None
        if self.attrs[cudaMemPoolReuseAllowOpportunistic]:
            for b in fits:
                if b.free_done():
                    return b, None
        return None, (fits[0] if fits and self.attrs[
            cudaMemPoolReuseAllowInternalDependencies] else None)

    def malloc(self, size, q):
        """A block of ``size`` bytes for work on queue ``q``, in its order."""
        dev = _state(self.device_id)
        with self.lock:
            block, waits = self._take(size, q)
            if block is None and not dev.reserve(size):
                self._release(0)
                if not dev.reserve(size):
                    if waits is None:
                        raise runtime.CUDARuntimeError(
                            runtime.errorMemoryAllocation)
                    block = waits
            if block is None:
                block = _Block(size, self.device_id)
                self.reserved += size
                _hardware.host_sleep(_hardware.profile.malloc_s)
            else:
                self.free.remove(block)
            if block is waits and not block.free_done():
                q.submit(_noop, None, deps=[block.free_item])
            block.queue = block.free_item = None
            self.live[block.ptr] = block
            self.used += block.size
            self._high()
            return block

    def free_block(self, ptr, q):
        with self.lock:
            block = self.live.pop(ptr, None)
            if block is None:
                raise runtime.CUDARuntimeError(runtime.errorInvalidValue)
            self.used -= block.size
            block.queue = q
            block.free_item = q.last if q.capture is None else None
            self.free.append(block)

    def _release(self, keep):
        """Give freed blocks whose free has run back to the device until the
        pool holds at most ``keep`` bytes (cudaMemPoolTrimTo)."""
        dev = _state(self.device_id)
        for b in list(self.free):
            if self.reserved <= keep:
                break
            if b.free_done():
                self.free.remove(b)
                self.reserved -= b.size
                dev.release(b.size)

    def release_above_threshold(self):
        """At a synchronization: memory beyond the release threshold goes
        back to the device."""
        keep = self.attrs[cudaMemPoolAttrReleaseThreshold]
        if self.reserved > keep:
            with self.lock:
                self._release(keep)

    def _high(self):
        a = self.attrs
        a[cudaMemPoolAttrReservedMemHigh] = max(
            a[cudaMemPoolAttrReservedMemHigh], self.reserved)
        a[cudaMemPoolAttrUsedMemHigh] = max(a[cudaMemPoolAttrUsedMemHigh],
                                            self.used)


def _noop():
    pass


_pools = {}
_pools_lock = threading.Lock()


def _pool(device_id):
    p = _pools.get(device_id)
    if p is None:
        with _pools_lock:
            p = _pools.get(device_id) or _pools.setdefault(
                device_id, _Pool(device_id))
    return p


def _pool_of_handle(pool):
    for p in list(_pools.values()):
        if p.handle == pool:
            return p
    device_id = pool - _HANDLE
    if 0 <= device_id < runtime.getDeviceCount():
        return _pool(device_id)
    raise runtime.CUDARuntimeError(runtime.errorInvalidValue)


def _supported(device_id):
    if not runtime.deviceGetAttribute(
            runtime.cudaDevAttrMemoryPoolsSupported, device_id):
        raise RuntimeError(
            "Device {} does not support malloc_async".format(device_id))


# -- cupy.cuda.runtime ------------------------------------------------------
def mallocAsync(size, stream):
    if size == 0:
        return 0
    return _pool(runtime.getDevice()).malloc(size, _queue_of_handle(stream)).ptr


def freeAsync(ptr, stream):
    _pool(runtime.getDevice()).free_block(ptr, _queue_of_handle(stream))


def deviceGetDefaultMemPool(device):
    return _pool(runtime._check(device)).handle


def deviceGetMemPool(device):
    return _pool(runtime._check(device)).handle


def deviceSetMemPool(device, pool):
    """Only a device's own default pool can be its current one here."""
    if _pool_of_handle(pool) is not _pool(runtime._check(device)):
        raise runtime.CUDARuntimeError(runtime.errorInvalidValue)


def memPoolTrimTo(pool, size):
    p = _pool_of_handle(pool)
    with p.lock:
        p._release(size)


def memPoolGetAttribute(pool, attr):
    p = _pool_of_handle(pool)
    if attr == cudaMemPoolAttrReservedMemCurrent:
        return p.reserved
    if attr == cudaMemPoolAttrUsedMemCurrent:
        return p.used
    if attr not in p.attrs:
        raise runtime.CUDARuntimeError(runtime.errorInvalidValue)
    return p.attrs[attr]


def memPoolSetAttribute(pool, attr, value):
    p = _pool_of_handle(pool)
    if attr in (cudaMemPoolAttrReservedMemHigh, cudaMemPoolAttrUsedMemHigh):
        if value != 0:          # CUDA: these can only be reset to 0
            raise runtime.CUDARuntimeError(runtime.errorInvalidValue)
        p.attrs[attr] = p.reserved if attr == 6 else p.used
    elif attr in p.attrs:
        p.attrs[attr] = int(value)
    else:
        raise runtime.CUDARuntimeError(runtime.errorInvalidValue)


# -- cupy.cuda.memory -------------------------------------------------------
class MemoryAsync(_Raw):
    """Device memory from the stream-ordered allocator, freed in the order
    of the stream it was allocated on (or the current one, once that stream
    is gone)."""

    __slots__ = ("size", "device_id", "ptr", "stream_ref", "chunk", "buf",
                 "__weakref__")

    def __init__(self, size, stream):
        device_id = runtime._tls.device
        self.stream_ref = weakref.ref(stream)
        _supported(device_id)
        mem = None
        if size > 0:
            mem = _pool(device_id).malloc(size, _queue_of(stream)).mem
        self._own(size, device_id, mem)

    def __del__(self):
        if not getattr(self, "ptr", 0):
            return
        stream = self.stream_ref()
        if stream is None:
            stream = get_current_stream()
        prev = runtime._tls.device
        runtime._tls.device = self.device_id
        try:
            _pool(self.device_id).free_block(self.ptr, _queue_of(stream))
        finally:
            runtime._tls.device = prev


@api("call")
def malloc_async(size):
    """Allocate ``size`` bytes from the stream-ordered allocator, on the
    current stream."""
    return MemoryPointer(MemoryAsync(size, get_current_stream()), 0)


class MemoryAsyncPool:
    """CuPy's interface to each device's stream-ordered pool."""

    def __init__(self, pool_handles="current"):
        self._pools = []
        self.memoryAsyncHasStat = True      # the model's driver has them
        n = runtime.getDeviceCount()
        prev = runtime.getDevice()
        many = (not isinstance(pool_handles, str)
                and hasattr(pool_handles, "__getitem__"))
        limit = memory_limit_from_env()
        for dev_id in range(n):
            try:
                runtime.setDevice(dev_id)
                handle = pool_handles[dev_id] if many else pool_handles
                self._pools.append(self._set_pool(handle, dev_id))
                self.set_limit(**limit)
            finally:
                runtime.setDevice(prev)

    @staticmethod
    def _set_pool(handle, dev_id):
        if handle == "default":
            pool = deviceGetDefaultMemPool(dev_id)
        elif handle == "current":
            pool = deviceGetMemPool(dev_id)
        elif handle == "create":
            raise NotImplementedError("cudaMemPoolCreate is not yet "
                                      "supported")
        elif isinstance(handle, int):
            pool = handle
        else:
            raise ValueError("handle must be "
                             "'default' (for the device's default pool), "
                             "'current' (for the device's current pool), "
                             "or int (a pointer to cudaMemPool_t)")
        deviceSetMemPool(dev_id, pool)
        return pool

    @api("call")
    def malloc(self, size):
        """Allocate from the current device's pool on the current stream."""
        rounded = _round_size(size)
        curr_total, total_limit = self.total_bytes(), 0
        if curr_total - self.used_bytes() < rounded:
            total_limit = self.get_limit()
            if max(total_limit, curr_total) < curr_total + rounded:
                raise OutOfMemoryError(size, curr_total, total_limit)
        for attempt in range(3):
            try:
                return malloc_async(rounded)
            except runtime.CUDARuntimeError as e:
                if e.status != runtime.errorMemoryAllocation:
                    raise
                if attempt < 2:
                    get_current_stream().synchronize()
        raise OutOfMemoryError(size, curr_total, total_limit)

    def _handle(self):
        return self._pools[runtime.getDevice()]

    def free_all_blocks(self, stream=None):
        """Synchronize ``stream`` (default: the current one), then give
        every freed block back to the device."""
        if stream is None:
            stream = get_current_stream()
        stream.synchronize()
        memPoolTrimTo(self._handle(), 0)

    def n_free_blocks(self):
        raise NotImplementedError(
            "This function is not supported in MemoryAsyncPool")

    def used_bytes(self):
        return memPoolGetAttribute(self._handle(),
                                   cudaMemPoolAttrUsedMemCurrent)

    def free_bytes(self):
        return self.total_bytes() - self.used_bytes()

    def total_bytes(self):
        return memPoolGetAttribute(self._handle(),
                                   cudaMemPoolAttrReservedMemCurrent)

    def set_limit(self, size=None, fraction=None):
        """Set the release threshold (a soft limit) of the current device's
        pool; 0 or nothing: UINT64_MAX, the pool never shrinks."""
        size = _limit_bytes(size, fraction, runtime.memGetInfo()[1])
        if size == 0:
            size = UINT64_MAX
        memPoolSetAttribute(self._handle(), cudaMemPoolAttrReleaseThreshold,
                            int(size))

    def get_limit(self):
        return memPoolGetAttribute(self._handle(),
                                   cudaMemPoolAttrReleaseThreshold)


def memory_limit_from_env():
    """CuPy's ``_parse_limit_string``: CUPY_GPU_MEMORY_LIMIT, in bytes or
    as a percentage."""
    limit = os.environ.get("CUPY_GPU_MEMORY_LIMIT")
    if limit is None:
        return {"size": None, "fraction": None}
    if limit.endswith("%"):
        return {"size": None, "fraction": float(limit[:-1]) / 100.0}
    return {"size": int(limit), "fraction": None}


for _name in ("MemoryAsync", "malloc_async", "MemoryAsyncPool"):
    setattr(memory, _name, globals()[_name])
for _name in ("mallocAsync", "freeAsync", "deviceGetDefaultMemPool",
              "deviceGetMemPool", "deviceSetMemPool", "memPoolTrimTo",
              "memPoolGetAttribute", "memPoolSetAttribute",
              "cudaMemPoolReuseFollowEventDependencies",
              "cudaMemPoolReuseAllowOpportunistic",
              "cudaMemPoolReuseAllowInternalDependencies",
              "cudaMemPoolAttrReleaseThreshold",
              "cudaMemPoolAttrReservedMemCurrent",
              "cudaMemPoolAttrReservedMemHigh",
              "cudaMemPoolAttrUsedMemCurrent", "cudaMemPoolAttrUsedMemHigh"):
    setattr(runtime, _name, globals()[_name])
