"""Device memory on the CPU device model (`cupy.cuda.memory`): the pool
rounds, caches and limits like CuPy's, hooks see CuPy's keywords, and
finished work keeps no buffer alive."""
import ctypes
import gc
import weakref

import numpy
import pytest

import src.cpudevice as cp
from modelkit import Gate

pool = cp.get_default_memory_pool()


@pytest.fixture(autouse=True)
def empty_cache():
    """Each test starts with the device idle, the pool's cache empty, and
    a stream of its own: the pool caches blocks per stream, and a block an
    earlier test split (one part still alive) must not serve these tests."""
    cp.cuda.runtime.deviceSynchronize()
    pool.free_all_blocks()
    with cp.cuda.Stream(non_blocking=True) as stream:
        yield stream
        stream.synchronize()


def test_mem_info_sees_pool_reservations():
    free0, total = cp.cuda.runtime.memGetInfo()
    x = cp.empty(1 << 20, cp.uint8)
    free1, _ = cp.cuda.runtime.memGetInfo()
    assert free0 - free1 == 1 << 20 and total == cp.cuda.Device().mem_info[1]
    del x


def test_results_come_from_the_pool():
    x = cp.empty(1000, cp.float32)
    before = pool.used_bytes()
    y = x + 1
    assert pool.used_bytes() - before == 4096
    del x, y


def test_pool_rounds_to_512_bytes_and_caches_blocks():
    pool.free_all_blocks()
    base_used, base_total = pool.used_bytes(), pool.total_bytes()
    base_free = pool.free_bytes()
    x = cp.empty(1000, cp.float32)
    assert pool.used_bytes() - base_used == 4096
    assert pool.free_bytes() == base_free
    del x
    assert pool.used_bytes() == base_used
    assert pool.total_bytes() - base_total == 4096    # cached, not freed
    assert pool.free_bytes() - base_free == 4096
    assert pool.total_bytes() == pool.used_bytes() + pool.free_bytes()
    assert pool.n_free_blocks() >= 1
    y = cp.empty(1000, cp.float32)                    # reuses the block
    assert pool.total_bytes() - base_total == 4096
    del y
    pool.free_all_blocks()
    assert pool.total_bytes() == base_total


def test_limit_and_out_of_memory_after_freeing_the_cache():
    pool.free_all_blocks()
    pool.set_limit(size=1 << 20)
    try:
        assert pool.get_limit() == 1 << 20
        x = cp.empty(700 << 10, cp.uint8)
        del x                                       # cached: 700 KiB held
        y = cp.empty(900 << 10, cp.uint8)           # fits after a retry
        with pytest.raises(cp.cuda.memory.OutOfMemoryError) as e:
            cp.empty(2 << 20, cp.uint8)
        assert isinstance(e.value, MemoryError)
        assert "limit set to: 1,048,576 bytes" in str(e.value)
        del y
    finally:
        pool.set_limit(size=0)
    total = cp.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"]
    with pytest.raises(cp.cuda.memory.OutOfMemoryError,
                       match=f"Out of memory allocating {total + 512:,}"):
        cp.empty(total + 1, cp.uint8)


def test_memory_hook_is_called_with_cupys_keywords():
    calls = []

    class Rec(cp.cuda.MemoryHook):
        name = "rec"

        def malloc_postprocess(self, **kw):
            calls.append(("malloc", sorted(kw)))

        def alloc_postprocess(self, **kw):
            calls.append(("alloc", sorted(kw)))

        def free_postprocess(self, **kw):
            calls.append(("free", sorted(kw)))

    pool.free_all_blocks()
    with Rec():
        x = cp.empty(12345, cp.uint8)
        del x
    assert ("malloc", ["device_id", "mem_ptr", "mem_size", "pmem_id",
                       "size"]) in calls
    assert ("alloc", ["device_id", "mem_ptr", "mem_size"]) in calls
    assert ("free", ["device_id", "mem_ptr", "mem_size", "pmem_id"]) in calls


def test_finished_work_keeps_no_buffer_alive():
    # A GPU holds nothing of work that has run, so a freed buffer's memory
    # goes back at once (the model's worker used to keep its last item).
    class Payload:
        pass
    payload = Payload()
    alive = weakref.ref(payload)
    s = cp.cuda.Stream(non_blocking=True)
    s.launch_host_func(lambda arg: None, payload)
    s.synchronize()
    del payload
    assert alive() is None


def test_allocations_are_256_byte_aligned():
    keep = [cp.empty(n, cp.uint8) for n in (1, 255, 256, 511, 513, 3000)]
    del keep[1::2]                               # split and reuse the blocks
    keep += [cp.empty(n, cp.uint8) for n in (7, 700, 70000)]
    for a in keep:
        assert a.data.ptr % 256 == 0, hex(a.data.ptr)
    assert cp.empty(0).data.ptr == 0


def test_out_of_memory_error_text_is_cupys_own():
    cap = cp.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"]
    size = (cap + 1 + 511) // 512 * 512
    with pytest.raises(cp.cuda.memory.OutOfMemoryError) as e:
        cp.empty(cap + 1, cp.uint8)
    total = pool.total_bytes()
    assert str(e.value) == ("Out of memory allocating {:,} bytes "
                            "(allocated so far: {:,} bytes).".format(size,
                                                                     total))
    pool.set_limit(size=1 << 20)
    try:
        with pytest.raises(cp.cuda.memory.OutOfMemoryError) as e:
            cp.empty(2 << 20, cp.uint8)
        assert str(e.value) == (
            "Out of memory allocating 2,097,152 bytes (allocated so far: "
            "{:,} bytes, limit set to: 1,048,576 bytes).".format(
                pool.total_bytes()))
    finally:
        pool.set_limit(size=0)
    err = cp.cuda.memory.OutOfMemoryError(1000, -1)
    assert str(err) == "Out of memory allocating 1,000 bytes"
    assert isinstance(err, MemoryError)


def test_memory_pointer_plus_an_offset():
    x = cp.arange(6, dtype=cp.float64)
    p = x.data + 16
    assert isinstance(p, cp.cuda.MemoryPointer)
    assert p.ptr == x.data.ptr + 16 and p.mem is x.data.mem
    assert (16 + x.data).ptr == p.ptr and (p - 8).ptr == x.data.ptr + 8
    q = x.data + 0
    q += 24
    assert q.ptr == x.data.ptr + 24 and int(q) == q.ptr
    y = cp.ndarray((4,), cp.float64, memptr=x.data + 16)
    assert y.get().tolist() == [2.0, 3.0, 4.0, 5.0]
    null = cp.empty(0).data         # a zero-size array's: the null pointer
    assert null.ptr == 0
    null += 0
    assert null.ptr == 0
    with pytest.raises(AssertionError):     # as CuPy's __iadd__ asserts
        null += 8


# -- memory CuPy does not own, and what a pointer is -------------------------

def test_every_memory_class_is_a_base_memory():
    mem = cp.cuda.memory
    for cls in (mem.Memory, mem.ManagedMemory, mem.MemoryAsync,
                mem.UnownedMemory):
        assert issubclass(cls, mem.BaseMemory)
    assert isinstance(cp.empty(8).data.mem, mem.BaseMemory)


def test_pointer_attributes_say_what_a_pointer_is():
    rt = cp.cuda.runtime
    with cp.cuda.Device(1):
        x = cp.empty(100, cp.uint8)
    attrs = rt.pointerGetAttributes(x.data.ptr + 10)
    assert (attrs.device, attrs.type) == (1, rt.memoryTypeDevice)
    managed = cp.cuda.malloc_managed(64)
    assert rt.pointerGetMemoryType(managed.ptr) == rt.memoryTypeManaged
    pinned = cp.cuda.alloc_pinned_memory(64)
    assert rt.pointerGetMemoryType(pinned.ptr) == rt.memoryTypeHost
    host = numpy.zeros(4)
    attrs = rt.pointerGetAttributes(host.ctypes.data)
    assert (attrs.device, attrs.type) == (rt.cudaInvalidDeviceId,
                                          rt.memoryTypeUnregistered)


def test_a_block_freed_in_a_cycle_of_garbage_stays_known():
    """The garbage collector frees an array in a reference cycle; its pool
    block's finalizer gives the block back to the pool, alive. Handed out
    again, the block is still device memory to pointerGetAttributes."""
    x = cp.empty(4096, cp.uint8)
    ptr = x.data.ptr
    cycle = [x]
    cycle.append(cycle)
    del x, cycle
    gc.collect()
    y = cp.empty(4096, cp.uint8)
    assert y.data.ptr == ptr                # the same block, reused
    attrs = cp.cuda.runtime.pointerGetAttributes(ptr)
    assert attrs.type == cp.cuda.runtime.memoryTypeDevice
    assert cp.cuda.UnownedMemory(ptr, 4096, y).device_id == 0


@pytest.mark.parametrize("allocate", ["pool", "cudaMalloc", "managed",
                                      "async"])
def test_unowned_memory_views_the_owners_bytes(allocate):
    src = {"pool": cp.cuda.alloc, "cudaMalloc": lambda n: cp.cuda.
           MemoryPointer(cp.cuda.Memory(n), 0),
           "managed": cp.cuda.malloc_managed,
           "async": cp.cuda.malloc_async}[allocate](24)
    mem = cp.cuda.UnownedMemory(src.ptr, 24, src)
    assert (mem.ptr, mem.size, mem.device_id) == (src.ptr, 24, 0)
    a = cp.ndarray((2, 3), cp.float32, cp.cuda.MemoryPointer(mem, 0))
    b = cp.ndarray((2, 3), cp.float32, src)
    owner = weakref.ref(src)
    del src
    assert owner() is not None              # the unowned memory holds it
    a[:] = 2
    assert bool((b == 2).all())             # the same bytes


def test_unowned_memory_takes_the_device_it_is_given():
    with cp.cuda.Device(1):
        src = cp.cuda.alloc(16)
    assert cp.cuda.UnownedMemory(src.ptr, 16, src).device_id == 1
    assert cp.cuda.UnownedMemory(src.ptr, 16, src, 1).device_id == 1
    with pytest.raises(RuntimeError, match="explicit device ID"):
        cp.cuda.UnownedMemory(0, 0, None)
    assert cp.cuda.UnownedMemory(0, 0, None, 0).device_id == 0


# -- MemoryPointer's raw copies and fills -------------------------------------

def as_address(c, raw):
    """A ctypes object's address, as CuPy takes it: an int or c_void_p."""
    p = ctypes.cast(ctypes.byref(c), ctypes.c_void_p)
    return p.value if raw else p


@pytest.mark.parametrize("raw", [False, True])
def test_copies_to_and_from_the_host_and_the_device(raw):
    a, b = cp.cuda.alloc(4), cp.cuda.alloc(4)
    value, out = ctypes.c_int(100), ctypes.c_int()
    a.copy_from(as_address(value, raw), 4)
    b.copy_from(a, 4)
    b.copy_to_host(as_address(out, raw), 4)
    assert out.value == 100
    c = cp.cuda.alloc(4)
    c.copy_from_async(as_address(value, raw), 4)
    c.copy_from_async(b, 4)
    c.copy_to_host_async(as_address(out, raw), 4)
    cp.cuda.get_current_stream().synchronize()
    assert out.value == 100


def test_memset_sets_bytes_on_the_null_stream_and_async_on_a_stream():
    a = cp.cuda.alloc(8)
    a.memset(1, 4)
    (a + 4).memset_async(0x1FF, 4)          # the low byte, as cudaMemset
    cp.cuda.get_current_stream().synchronize()
    cp.cuda.Stream.null.synchronize()
    out = (ctypes.c_ubyte * 8)()
    a.copy_to_host(ctypes.addressof(out), 8)
    assert list(out) == [1] * 4 + [255] * 4


def test_an_async_copy_waits_its_turn_on_its_stream(empty_cache):
    stream = empty_cache
    a = cp.cuda.alloc(8)
    a.memset_async(7, 8, stream)
    host = cp.cuda.alloc_pinned_memory(8)
    view = numpy.frombuffer(host, numpy.uint8, 8)
    view[:] = 0
    gate = Gate().hold_stream(stream)
    a.copy_to_host_async(host.ptr, 8, stream)
    assert not stream.done and view.tolist() == [0] * 8    # queued
    gate.open()
    stream.synchronize()
    assert view.tolist() == [7] * 8


def test_copies_refuse_a_capturing_stream_where_cupy_does(empty_cache):
    stream = empty_cache
    a, b = cp.cuda.alloc(8), cp.cuda.alloc(8)
    a.memset_async(9, 8, stream)
    b.memset_async(3, 8, stream)
    stream.synchronize()
    host, out = ctypes.c_double(), (ctypes.c_ubyte * 8)()
    stream.begin_capture()
    try:
        with pytest.raises(RuntimeError, match="synchronous API calls"):
            a.copy_from(b, 8)
        with pytest.raises(RuntimeError, match="H2D transfers"):
            a.copy_from_host_async(ctypes.addressof(host), 8)
        with pytest.raises(RuntimeError, match="D2H transfers"):
            a.copy_to_host_async(ctypes.addressof(host), 8)
        a.copy_from_device_async(b, 8)      # captured, as on a GPU
        a.memset_async(5, 4)
    finally:
        graph = stream.end_capture()
    a.copy_to_host(ctypes.addressof(out), 8)
    assert list(out) == [9] * 8             # recorded, not run
    graph.launch(stream)
    stream.synchronize()
    a.copy_to_host(ctypes.addressof(out), 8)
    assert list(out) == [5] * 4 + [3] * 4


def test_raw_copy_errors():
    a = cp.cuda.alloc(8)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="cudaErrorInvalidValue"):
        a.memset(0, 4096)                   # past its block
    with pytest.raises(OverflowError):
        a.memset(0, -1)
