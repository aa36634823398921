"""CuPy's allocators on the CPU device model (``cupy.cuda.memory``): the
current allocator and no pool, a pool over another allocator, the
stream-ordered pool (cudaMallocAsync) and managed memory, with the
behaviour and the errors CuPy documents."""
import json

import pytest

import src.cpudevice as cp

import modelkit
from modelkit import hardware
import subproc

runtime = cp.cuda.runtime
pool = cp.get_default_memory_pool()


@pytest.fixture(autouse=True)
def default_allocator():
    """Each test starts and ends with the default pool as the allocator."""
    cp.cuda.set_allocator(pool.malloc)
    runtime.deviceSynchronize()
    yield
    modelkit.open_all_gates()
    cp.cuda.set_allocator(pool.malloc)
    runtime.deviceSynchronize()


def device_free():
    return runtime.memGetInfo()[0]


# -- the current allocator ---------------------------------------------------
def test_the_default_allocator_is_the_default_pool():
    assert cp.cuda.get_allocator() == pool.malloc
    x = cp.empty(1000, cp.float32)
    assert type(x.data.mem).__name__ == "_PooledMemory"


def test_no_pool_gives_each_free_back_to_the_device():
    pool.free_all_blocks()
    cp.cuda.set_allocator(None)
    assert cp.cuda.get_allocator() is modelkit.no_pool_malloc()
    used, free0 = pool.used_bytes(), device_free()
    x = cp.arange(1 << 18, dtype=cp.float32)        # 1 MiB
    assert isinstance(x.data.mem, cp.cuda.Memory)
    assert free0 - device_free() == 1 << 20 and pool.used_bytes() == used
    assert float(x.sum()) == float(sum(range(1 << 18)))
    del x
    assert device_free() == free0                   # cudaFree at once


def test_no_pool_out_of_memory_is_cudas_error_not_the_pools():
    cp.cuda.set_allocator(None)
    total = runtime.memGetInfo()[1]
    with pytest.raises(runtime.CUDARuntimeError) as e:
        cp.empty(total + 1, cp.uint8)
    assert e.value.status == runtime.errorMemoryAllocation
    assert str(e.value) == "cudaErrorMemoryAllocation: out of memory"


def test_using_allocator_is_per_thread_and_blocks_set_allocator():
    mine = cp.cuda.MemoryPool()
    with cp.cuda.using_allocator(mine.malloc):
        assert cp.cuda.get_allocator() == mine.malloc
        x = cp.empty(1000, cp.float32)
        assert mine.used_bytes() == 4096
        with pytest.raises(ValueError, match="Can't change the global "
                           "allocator inside `using_allocator`"):
            cp.cuda.set_allocator(None)
    assert cp.cuda.get_allocator() == pool.malloc
    del x
    assert mine.used_bytes() == 0


def test_alloc_calls_the_current_allocator():
    mine = cp.cuda.MemoryPool()
    cp.cuda.set_allocator(mine.malloc)
    p = cp.cuda.alloc(100)
    assert mine.used_bytes() == 512 and isinstance(p, cp.cuda.MemoryPointer)


def test_a_pool_over_another_allocator():
    """``MemoryPool(allocator)`` takes its blocks from ``allocator`` (with
    the rounded size) and gives them back by dropping them."""
    sizes = []

    def allocator(size):
        sizes.append(size)
        return modelkit.no_pool_malloc()(size)
    mine = cp.cuda.MemoryPool(allocator)
    cp.cuda.set_allocator(mine.malloc)
    free0 = device_free()
    x = cp.ones(1000, cp.float32)
    assert sizes == [4096] and mine.total_bytes() == 4096
    del x
    assert mine.free_bytes() == 4096 and free0 - device_free() == 4096
    y = cp.ones(1000, cp.float32)                   # a hit: no new block
    assert sizes == [4096]
    del y
    mine.free_all_blocks()
    assert mine.total_bytes() == 0 and device_free() == free0


def test_an_allocator_lending_another_librarys_memory_backs_arrays():
    """An allocator may return CuPy a pointer into memory another library
    owns (``UnownedMemory``, at an offset too), as CuPy's interoperability
    guide lends PyTorch's allocator: arrays made with it view those bytes,
    and the owner's memory stays alive while they do."""
    other = cp.cuda.MemoryPool()
    blocks = []

    def lend(size):
        block = other.malloc(size + 512)
        blocks.append(block)
        mem = cp.cuda.UnownedMemory(block.ptr, size + 512, block)
        return cp.cuda.MemoryPointer(mem, 512)
    before = pool.used_bytes()
    with cp.cuda.using_allocator(lend):
        x = cp.arange(1000, dtype=cp.float32)
    assert x.data.ptr == blocks[0].ptr + 512
    assert pool.used_bytes() == before and other.used_bytes() == 4608
    assert float(x.sum()) == 499500.0
    blocks.clear()
    x += 1                              # the array keeps the block alive
    assert float(x[-1]) == 1000.0
    del x
    assert other.used_bytes() == 0


def test_a_pool_of_managed_memory():
    mine = cp.cuda.MemoryPool(cp.cuda.malloc_managed)
    cp.cuda.set_allocator(mine.malloc)
    x = cp.arange(10, dtype=cp.float32)
    assert int(x.sum()) == 45
    assert isinstance(x.data.mem.chunk, object)
    assert mine.used_bytes() == 512


# -- the stream-ordered pool -------------------------------------------------
def test_memory_async_pool_by_default_never_shrinks():
    ap = cp.cuda.MemoryAsyncPool()
    assert ap.get_limit() == 2 ** 64 - 1           # CuPy: UINT64_MAX
    cp.cuda.set_allocator(ap.malloc)
    base = ap.total_bytes()
    x = cp.ones(1 << 20, cp.uint8)
    assert isinstance(x.data.mem, cp.cuda.MemoryAsync)
    assert ap.used_bytes() >= 1 << 20
    del x
    runtime.deviceSynchronize()
    assert ap.total_bytes() - base >= 1 << 20       # kept for reuse
    ap.free_all_blocks()
    assert ap.total_bytes() == 0 and ap.used_bytes() == 0


def test_release_threshold_gives_memory_back_at_a_synchronization():
    ap = cp.cuda.MemoryAsyncPool()              # its statistics only
    ap.free_all_blocks()
    handle = runtime.deviceGetMemPool(0)
    attr = runtime.cudaMemPoolAttrReleaseThreshold
    old = runtime.memPoolGetAttribute(handle, attr)
    runtime.memPoolSetAttribute(handle, attr, 1 << 20)
    try:
        cp.cuda.set_allocator(cp.cuda.malloc_async)
        x, y = cp.ones(1 << 20, cp.uint8), cp.ones(1 << 20, cp.uint8)
        assert ap.total_bytes() == 2 << 20
        del x, y
        assert ap.total_bytes() == 2 << 20         # no sync yet
        cp.cuda.get_current_stream().synchronize()
        assert ap.total_bytes() <= 1 << 20          # down to the threshold
    finally:
        runtime.memPoolSetAttribute(handle, attr, old)
        ap.free_all_blocks()


def test_set_limit_is_the_release_threshold_and_a_soft_limit():
    ap = cp.cuda.MemoryAsyncPool()
    ap.free_all_blocks()
    ap.set_limit(size=1 << 20)
    try:
        assert runtime.memPoolGetAttribute(
            runtime.deviceGetMemPool(0),
            runtime.cudaMemPoolAttrReleaseThreshold) == 1 << 20
        with pytest.raises(cp.cuda.memory.OutOfMemoryError,
                           match="limit set to: 1,048,576 bytes"):
            ap.malloc(2 << 20)
        with pytest.raises(ValueError, match="size and fraction"):
            ap.set_limit(size=1, fraction=0.5)
    finally:
        ap.set_limit()
        ap.free_all_blocks()


def test_a_free_is_reused_at_once_on_its_own_stream():
    s = cp.cuda.Stream(non_blocking=True)
    gate = modelkit.Gate().hold_stream(s)       # s's work has not run
    with s:
        p = cp.cuda.malloc_async(1 << 20)
        ptr = p.ptr
        del p                                   # freed in s's order
        q = cp.cuda.malloc_async(1 << 20)
    assert q.ptr == ptr
    gate.open()
    s.synchronize()


def test_a_free_is_not_handed_to_another_stream_before_it_has_run():
    """The stream-ordered reuse test: a block freed on ``a`` while ``a``'s
    work is held goes to ``b`` only once ``a`` has done that work."""
    a = cp.cuda.Stream(non_blocking=True)
    b = cp.cuda.Stream(non_blocking=True)
    gate = modelkit.Gate().hold_stream(a)
    with a:
        p = cp.cuda.malloc_async(1 << 20)
        ptr = p.ptr
        del p
    with b:
        q = cp.cuda.malloc_async(1 << 20)       # a's free has not run
    assert q.ptr != ptr
    gate.open()
    a.synchronize()
    with b:
        r = cp.cuda.malloc_async(1 << 20)       # now it has: reused
    assert r.ptr == ptr
    del q, r


def test_results_are_right_when_blocks_are_reused_across_streams():
    ap = cp.cuda.MemoryAsyncPool()
    cp.cuda.set_allocator(ap.malloc)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    for i in range(6):
        with streams[i % 2]:
            x = cp.full(1 << 16, i, cp.float32)
            assert float((x * 2).sum()) == 2.0 * i * (1 << 16)
    ap.free_all_blocks()


def test_memory_async_pool_errors_are_cupys():
    with pytest.raises(NotImplementedError,
                       match="not supported in MemoryAsyncPool"):
        cp.cuda.MemoryAsyncPool().n_free_blocks()
    with pytest.raises(NotImplementedError, match="cudaMemPoolCreate"):
        cp.cuda.MemoryAsyncPool("create")
    with pytest.raises(ValueError, match="handle must be 'default'"):
        cp.cuda.MemoryAsyncPool(1.5)
    assert runtime.deviceGetDefaultMemPool(0) == runtime.deviceGetMemPool(0)


def test_a_device_without_memory_pools_refuses_malloc_async():
    old = hardware.profile
    data = json.loads(json.dumps(old.data))
    data["properties"]["memoryPoolsSupported"] = 0
    hardware.set_profile(data)
    try:
        assert runtime.deviceGetAttribute(
            runtime.cudaDevAttrMemoryPoolsSupported, 0) == 0
        with pytest.raises(RuntimeError,
                           match="^Device 0 does not support malloc_async$"):
            cp.cuda.malloc_async(1024)
    finally:
        hardware.set_profile(old)
    assert runtime.deviceGetAttribute(
        runtime.cudaDevAttrMemoryPoolsSupported, 0) == 1


# -- managed memory ----------------------------------------------------------
def test_managed_memory_holds_an_array_larger_than_the_device():
    """An allocation larger than the modelled device succeeds with managed
    memory and fails with the default pool."""
    code = """
import src.cpudevice as cp
n = 96 << 20                                    # 96 MiB on a 64 MiB device
try:
    cp.empty(n, cp.uint8)
except cp.cuda.memory.OutOfMemoryError as e:
    print("pool:", e)
cp.cuda.set_allocator(cp.cuda.malloc_managed)
x = cp.ones(n // 4, cp.float32)
print("managed:", int(x.sum()), type(x.data.mem).__name__)
"""
    r = subproc.run_code(code, env={"BOOK_CPU_DEVICE_MEMORY": "64MiB",
                                    "BOOK_BACKEND": "cpu"})
    assert r.returncode == 0, r.stderr
    assert "pool: Out of memory allocating 100,663,296 bytes" in r.stdout
    assert "managed: 25165824 ManagedMemory" in r.stdout


def _kernel_ms(x):
    s = cp.cuda.get_current_stream()
    e0 = s.record()
    x *= 2
    e1 = s.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1)


def test_pages_on_the_host_migrate_on_first_touch_and_prefetch_moves_them():
    n = 32 << 20                                            # 32 MiB
    migrate_ms = n / hardware.profile.fault_bps * 1e3
    x = cp.ndarray((n // 4,), cp.float32,
                   memptr=cp.cuda.malloc_managed(n))
    x.fill(1)                                   # made on the device
    assert _kernel_ms(x) < migrate_ms / 4       # resident: no migration
    s = cp.cuda.get_current_stream()
    runtime.memPrefetchAsync(x.data.ptr, n, runtime.cudaCpuDeviceId, s.ptr)
    assert _kernel_ms(x) >= migrate_ms          # on the host: migrates
    assert _kernel_ms(x) < migrate_ms / 4       # and stays
    x.data.mem.prefetch(s, device_id=-1)
    x.data.mem.prefetch(s)                      # back ahead of use
    assert _kernel_ms(x) < migrate_ms / 4
    assert float(x[0]) == 16.0


def test_advice_to_stay_on_the_host_reads_over_the_link_each_time():
    n = 16 << 20
    x = cp.ndarray((n // 4,), cp.float32, memptr=cp.cuda.malloc_managed(n))
    x.fill(1)
    s = cp.cuda.get_current_stream()
    runtime.memPrefetchAsync(x.data.ptr, n, runtime.cudaCpuDeviceId, s.ptr)
    runtime.memAdvise(x.data.ptr, n, runtime.cudaMemAdviseSetPreferredLocation,
                      runtime.cudaCpuDeviceId)
    link_ms = n / hardware.profile.h2d_bps * 1e3
    assert _kernel_ms(x) >= link_ms and _kernel_ms(x) >= link_ms


def test_managed_memory_errors_are_cudas():
    p = cp.cuda.malloc_managed(1024)
    with pytest.raises(runtime.CUDARuntimeError) as e:
        runtime.memAdvise(p.ptr, 1024, 99, 0)
    assert e.value.status == runtime.errorInvalidValue
    with pytest.raises(runtime.CUDARuntimeError) as e:
        runtime.memPrefetchAsync(p.ptr, 1024, 7, 0)
    assert e.value.status == runtime.errorInvalidDevice
    with pytest.raises(runtime.CUDARuntimeError) as e:
        runtime.mallocManaged(1 << 62)
    assert e.value.status == runtime.errorMemoryAllocation


def _loop_ms(n=20):
    """Device time of ``n`` steps that each allocate a result."""
    x = cp.ones(1 << 10, cp.float32)
    s = cp.cuda.get_current_stream()
    e0 = s.record()
    for _ in range(n):
        y = x + 1
        del y
    e1 = s.record()
    e1.synchronize()
    return cp.cuda.get_elapsed_time(e0, e1)


def test_no_pool_pays_cudamalloc_at_every_allocation():
    n = 20
    _loop_ms(n)                                   # the pool's block is cached
    pooled = _loop_ms(n)
    cp.cuda.set_allocator(None)
    unpooled = _loop_ms(n)
    assert unpooled >= n * hardware.profile.malloc_s * 1e3
    assert pooled < unpooled / 2


def test_a_full_device_hands_a_pending_free_over_with_a_dependency():
    """No room for a new block: the pool reuses one whose free has not run
    on its stream, and the new stream's work waits for that free."""
    code = """
import src.cpudevice as cp, modelkit
cp.cuda.set_allocator(cp.cuda.malloc_async)
a = cp.cuda.Stream(non_blocking=True)
b = cp.cuda.Stream(non_blocking=True)
n = 40 << 20                                      # most of a 64 MiB device
gate = modelkit.Gate().hold_stream(a)
with a:
    x = cp.empty(n, cp.uint8)
    ptr = x.data.ptr
    del x
with b:
    y = cp.ones(n, cp.uint8)                      # waits for a's free
print("same block:", y.data.ptr == ptr)
print("b waits:", not b.done)
gate.open()
b.synchronize()
print("sum:", int(y.sum()))
"""
    r = subproc.run_code(code, env={"BOOK_CPU_DEVICE_MEMORY": "64MiB",
                                    "BOOK_BACKEND": "cpu"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == [
        "same block: True", "b waits: True", f"sum: {40 << 20}"]


def test_a_stream_handle_names_its_own_stream_and_no_other():
    """mallocAsync and memPrefetchAsync take a stream's handle: work they
    order goes to that stream; a handle no stream has is CUDA's error."""
    s = cp.cuda.Stream(non_blocking=True)
    ptr = runtime.mallocAsync(1024, s.ptr)
    runtime.freeAsync(ptr, s.ptr)
    s.synchronize()
    unknown = 0x7EAD_BEEF_0000        # no stream has it
    for call in (lambda: runtime.mallocAsync(1024, unknown),
                 lambda: runtime.memPrefetchAsync(
                     cp.cuda.malloc_managed(1024).ptr, 1024, 0, unknown)):
        with pytest.raises(runtime.CUDARuntimeError) as e:
            call()
        assert e.value.status == runtime.errorInvalidResourceHandle
