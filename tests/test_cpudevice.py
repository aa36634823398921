"""The CPU device model keeps CuPy's semantics (DESIGN: 'Semantics the CPU
device model must keep'). Ordering is tested with gates, never with timing."""
import gc
import threading
import weakref

import numpy
import pytest

import src.cpudevice as cp
import src.cpudevice.cupyx as cpx
import subproc
from modelkit import Gate, wait_until

pool = cp.get_default_memory_pool()


def run_py(code, **env):
    return subproc.output(code, env={"BOOK_BACKEND": "cpu", **env})


# -- backend selection --------------------------------------------------------
def test_cpu_backend_is_the_model():
    assert run_py("from src import BACKEND, cp, cpx; "
                  "print(BACKEND, cp.__name__, cpx.__name__)") == \
        "cpu src.cpudevice src.cpudevice.cupyx"


def test_auto_backend_works_without_cupy_installed():
    out = run_py("import sys; sys.modules['cupy'] = None\n"
                 "from src import BACKEND, cp; print(BACKEND, float(cp.ones(3)"
                 ".sum()))", BOOK_BACKEND="auto")
    assert out == "cpu 3.0"


def test_banner_names_backend_and_devices():
    out = run_py("from src import banner; banner()")
    # each device is named after the profile its timings are modelled on
    assert "CPU device model" in out and "H100 profile" in out
    assert "device 1: CPU device model (H100 profile)" in out
    assert all(len(line) <= 70 for line in out.splitlines())


# -- devices ------------------------------------------------------------------
def test_device_count_and_memory_are_configurable():
    out = run_py("from src import cp; r = cp.cuda.runtime\n"
                 "print(r.getDeviceCount(), "
                 "r.getDeviceProperties(2)['totalGlobalMem'])",
                 BOOK_CPU_DEVICES="3", BOOK_CPU_DEVICE_MEMORY="256MiB")
    assert out == f"3 {256 * 2**20}"


def test_properties_use_cupys_keys():
    p = cp.cuda.runtime.getDeviceProperties(0)
    assert isinstance(p["name"], bytes)
    for key in ("totalGlobalMem", "multiProcessorCount", "asyncEngineCount",
                "concurrentKernels", "major", "minor"):
        assert isinstance(p[key], int)
    # the device profile's value: the H100 reports 3 copy engines (the
    # model runs one per direction, as any device with two or more does)
    assert p["asyncEngineCount"] == 3
    assert p["concurrentKernels"] == 1


def test_bad_device_id_raises_cuda_invalid_device():
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
        with cp.cuda.Device(99):
            pass
    assert e.value.status == 101
    assert str(e.value).startswith("cudaErrorInvalidDevice")
    with pytest.raises(RuntimeError):
        cp.cuda.runtime.getDeviceProperties(-1)


def test_device_starts_lazily_on_first_use():
    out = run_py("from src import cp\n"
                 "from modelkit import device_initialized as started\n"
                 "a = started(0); x = cp.ones(3); print(a, started(0))")
    assert out == "False True"


def test_device_context_and_array_device():
    with cp.cuda.Device(1):
        x = cp.ones(3)
        assert cp.cuda.runtime.getDevice() == 1
    assert cp.cuda.runtime.getDevice() == 0
    assert x.device == cp.cuda.Device(1) and x.device.id == 1


def test_mem_info_sees_pool_reservations():
    free0, total = cp.cuda.runtime.memGetInfo()
    x = cp.empty(1 << 20, cp.uint8)
    free1, _ = cp.cuda.runtime.memGetInfo()
    assert free0 - free1 == 1 << 20 and total == cp.cuda.Device().mem_info[1]
    del x


def test_operands_on_another_device_raise_cupys_error():
    with cp.cuda.Device(1):
        y = cp.ones(3)
    with pytest.raises(ValueError, match=r"resides \(1\) is different from "
                                         r"the current device \(0\)"):
        cp.ones(3) + y
    z = cp.asarray(y)                   # a copy onto device 0
    assert z.device.id == 0 and float(z.sum()) == 3.0
    assert cp.asarray(z) is z           # already here: no copy


# -- arrays ---------------------------------------------------------------------
def test_array_operations_match_numpy():
    rng = numpy.random.default_rng(0)
    a, b = rng.random((4, 5)), rng.random((5, 3))
    x, y = cp.asarray(a), cp.asarray(b)
    numpy.testing.assert_allclose((x @ y).get(), a @ b)
    numpy.testing.assert_allclose(cp.sqrt(x * 2 + 1).get(),
                                  numpy.sqrt(a * 2 + 1))
    numpy.testing.assert_allclose(x.sum(axis=0).get(), a.sum(axis=0))
    assert float(x.max()) == a.max() and int(x.argmax()) == a.argmax()
    numpy.testing.assert_allclose(x.T.copy().get(), a.T)
    numpy.testing.assert_array_equal(x.astype(cp.float32).get(),
                                     a.astype(numpy.float32))
    x += 1
    numpy.testing.assert_allclose(x.get(), a + 1)
    numpy.testing.assert_array_equal(cp.arange(5).get(), numpy.arange(5))
    numpy.testing.assert_allclose(cp.linspace(0, 1, 5).get(),
                                  numpy.linspace(0, 1, 5))
    assert cp.zeros((2, 3), cp.int32).get().tolist() == [[0] * 3] * 2


def test_views_share_memory_and_fill_writes_through():
    x = cp.zeros(6)
    v = x[2:4]
    v.fill(5)
    assert x.get().tolist() == [0, 0, 5, 5, 0, 0]
    r = x.reshape(2, 3)
    r[1, :] = 7
    assert x.get().tolist() == [0, 0, 5, 7, 7, 7]


def test_seeded_random_is_reproducible():
    cp.random.seed(1)
    a = cp.random.rand(5).get()
    cp.random.seed(1)
    b = cp.random.rand(5).get()
    assert (a == b).all() and not (a == cp.random.rand(5).get()).all()
    g1, g2 = cp.random.default_rng(3), cp.random.default_rng(3)
    assert (g1.standard_normal(4).get() == g2.standard_normal(4).get()).all()


def test_host_errors_are_raised_at_the_call():
    with pytest.raises(ValueError, match="could not be broadcast"):
        cp.ones(3) + cp.ones(4)
    x = cp.ones(3, cp.float32)
    with pytest.raises(TypeError, match="float64 array cannot be set"):
        x.set(numpy.ones(3))
    with pytest.raises(ValueError, match="Shape mismatch"):
        x.set(numpy.ones(4, numpy.float32))
    with pytest.raises(ValueError, match="Shape mismatch"):
        x.get(out=numpy.empty(4, numpy.float32))
    with pytest.raises(ValueError, match="negative dimensions"):
        cp.empty(-1)
    with pytest.raises(TypeError, match="Unsupported type"):
        x + numpy.ones(3, numpy.float32)


def test_operations_are_queued_and_host_access_waits():
    s = cp.cuda.Stream()
    gate = Gate().hold_stream(s)
    with s:
        x = cp.ones(1000)
        y = x * 3                        # returns at once, behind the gate
        done = s.record()
    assert not done.done                 # the host got here first
    gate.open()
    with s:
        assert float(y.sum()) == 3000.0   # waits for the gate and y
    assert done.done


def test_results_come_from_the_pool():
    x = cp.empty(1000, cp.float32)
    before = pool.used_bytes()
    y = x + 1
    assert pool.used_bytes() - before == 4096
    del x, y


# -- streams and events ---------------------------------------------------------
def test_stream_is_in_order_and_synchronize_waits():
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros(10)
        for _ in range(50):
            x += 1
        s.synchronize()
        assert s.done
        assert float(x[0]) == 50


def test_legacy_null_stream_waits_for_blocking_streams():
    s = cp.cuda.Stream()
    gate = Gate().hold_stream(s)
    with cp.cuda.Stream.null:
        e = cp.cuda.Stream.null.record()
    assert not wait_until(lambda: e.done, 0.2)   # null waits for s
    gate.open()
    e.synchronize()
    assert e.done


def test_non_blocking_stream_does_not_sync_with_null():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    e = cp.cuda.Stream.null.record()
    assert wait_until(lambda: e.done)            # not held by s
    assert not s.done
    gate.open()
    s.synchronize()


def test_with_and_use_set_the_current_stream():
    s1, s2 = cp.cuda.Stream(), cp.cuda.Stream()
    assert cp.cuda.get_current_stream() == cp.cuda.Stream.null
    with s1:
        assert cp.cuda.get_current_stream() == s1
        with s2:
            assert cp.cuda.get_current_stream() == s2
        assert cp.cuda.get_current_stream() == s1
    s2.use()
    assert cp.cuda.get_current_stream() == s2
    cp.cuda.Stream.null.use()


def test_event_timing_and_errors():
    a, b = cp.cuda.Event(), cp.cuda.Event()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
        cp.cuda.get_elapsed_time(a, b)
    assert e.value.status == 400 and a.done
    s = cp.cuda.Stream(non_blocking=True)
    a.record(s)
    gate = Gate().hold_stream(s)
    b.record(s)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
        cp.cuda.get_elapsed_time(a, b)
    assert e.value.status == 600 and not b.done
    gate.open()
    b.synchronize()
    ms = cp.cuda.get_elapsed_time(a, b)
    assert ms >= 0


def test_wait_event_orders_work_across_streams():
    s1 = cp.cuda.Stream(non_blocking=True)
    s2 = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s1)
    ev = s1.record()
    s2.wait_event(ev)
    after = s2.record()
    assert not wait_until(lambda: after.done, 0.2)
    gate.open()
    after.synchronize()


def test_copy_engine_overlaps_compute_but_kernels_serialize():
    s1 = cp.cuda.Stream(non_blocking=True)
    s2 = cp.cuda.Stream(non_blocking=True)
    s3 = cp.cuda.Stream(non_blocking=True)
    host = cpx.empty_pinned(1000, numpy.float64)
    host[:] = 2
    with s2:
        dev = cp.empty(1000)
    s2.synchronize()
    gate = Gate().hold_engine(s1)          # s1 holds the compute engine
    dev.set(host, stream=s2)               # a copy: another engine
    copied = s2.record()
    with s3:
        k = dev + 0                        # a kernel: waits for the engine
        computed = s3.record()
    assert wait_until(lambda: copied.done)
    assert not wait_until(lambda: computed.done, 0.2)
    gate.open()
    computed.synchronize()
    assert float(k.sum()) == 2000


# -- memory -----------------------------------------------------------------------
def test_pool_rounds_to_512_bytes_and_caches_blocks():
    pool.free_all_blocks()
    base_used, base_total = pool.used_bytes(), pool.total_bytes()
    x = cp.empty(1000, cp.float32)
    assert pool.used_bytes() - base_used == 4096
    del x
    assert pool.used_bytes() == base_used
    assert pool.total_bytes() - base_total == 4096    # cached, not freed
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


def test_pinned_memory_and_pool():
    ppool = cp.get_default_pinned_memory_pool()
    mem = cp.cuda.alloc_pinned_memory(4000)
    a = numpy.frombuffer(mem, numpy.float32, 1000)
    assert cp.cuda.pinned_memory.is_memory_pinned(a.ctypes.data)
    assert not cp.cuda.pinned_memory.is_memory_pinned(
        numpy.empty(10).ctypes.data)
    n = ppool.n_free_blocks()
    del a, mem
    gc.collect()
    assert ppool.n_free_blocks() == n + 1
    b = cpx.zeros_pinned((3, 4), numpy.float32)
    assert b.shape == (3, 4) and (b == 0).all()
    c = cpx.empty_like_pinned(b)
    d = cpx.zeros_like_pinned(b, dtype=numpy.int8)
    assert c.dtype == numpy.float32 and d.dtype == numpy.int8
    assert cp.cuda.pinned_memory.is_memory_pinned(d.ctypes.data)


# -- host <-> device copies -------------------------------------------------------
def test_pageable_copy_is_staged_so_the_source_can_change_at_once():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    host = numpy.ones(1000)
    dev = cp.empty(1000)
    dev.set(host, stream=s)      # returns once staged, before the copy runs
    host[:] = 5
    gate.open()
    s.synchronize()
    assert dev.get().sum() == 1000


def test_pinned_copy_is_asynchronous_and_reads_the_buffer_later():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    host = cpx.empty_pinned(1000)
    host[:] = 1
    dev = cp.empty(1000)
    dev.set(host, stream=s)      # queued: reads host when it runs
    host[:] = 5                  # the hazard: overwritten before the copy
    gate.open()
    s.synchronize()
    assert dev.get().sum() == 5000


def test_get_into_pinned_out_without_blocking():
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        dev = cp.arange(100, dtype=cp.float32)
    gate = Gate().hold_stream(s)
    out = cpx.empty_pinned(100, numpy.float32)
    out[:] = -1
    r = dev.get(stream=s, out=out, blocking=False)
    assert r is out and out[0] == -1      # not copied yet
    gate.open()
    s.synchronize()
    assert out.tolist() == list(range(100))
    back = cp.asnumpy(dev, stream=s, out=numpy.empty(100, numpy.float32))
    assert back[99] == 99
    x = cp.asarray(out, blocking=True)
    assert float(x[5]) == 5


# -- graphs -------------------------------------------------------------------------
def test_capture_records_without_running_and_launch_replays():
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(4)
    x.get()
    with s:
        s.begin_capture()
        assert s.is_capturing()
        cp.add(x, x, out=x)
        g = s.end_capture()
    assert not s.is_capturing()
    assert x.get().tolist() == [1] * 4          # captured, not run
    for _ in range(3):
        g.launch(stream=s)
    s.synchronize()
    assert x.get().tolist() == [8] * 4


def test_capture_refuses_null_stream_and_host_sync():
    with pytest.raises(RuntimeError, match="cannot capture on the default"):
        cp.cuda.Stream.null.begin_capture()
    s = cp.cuda.Stream(non_blocking=True)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError):
        s.end_capture()
    x = cp.ones(2)
    with s:
        s.begin_capture()
        with pytest.raises(RuntimeError, match="capturing"):
            x.get()
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
            s.synchronize()
        assert e.value.status == 900
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
            s.end_capture()
        assert e.value.status == 901


# -- profiler, exceptions, debugging ------------------------------------------------
def test_profiler_benchmark_result_object():
    x = cp.ones(100)
    r = cpx.profiler.benchmark(lambda a: a * 2, (x,), n_repeat=20,
                               n_warmup=2, name="double")
    assert r.cpu_times.shape == (20,) and r.gpu_times.shape == (1, 20)
    assert (r.gpu_times > 0).all()
    text = str(r)
    assert text.startswith("double") and "CPU:" in text and "GPU-0:" in text
    with cpx.profiler.time_range("region", sync=True):
        x + 1

    @cpx.profiler.time_range("fn")
    def f():
        return 3
    assert f() == 3


def test_exception_classes_have_cupys_bases():
    assert issubclass(cp.cuda.runtime.CUDARuntimeError, RuntimeError)
    assert issubclass(cp.cuda.memory.OutOfMemoryError, MemoryError)


def test_cuda_launch_blocking_makes_every_operation_synchronous():
    code = ("from src import cp\n"
            "x = cp.ones(10**6); e0 = cp.cuda.Event()\n"
            "y = x * 2; e0.record(); print(e0.done)")
    assert run_py(code, CUDA_LAUNCH_BLOCKING="1") == "True"


# -- faults and lifetimes -------------------------------------------------------------
def test_failure_surfaces_at_next_sync_and_stream_stays_usable():
    s = cp.cuda.Stream(non_blocking=True)
    other = cp.cuda.Stream(non_blocking=True)

    def boom(_):
        raise ZeroDivisionError("inside the queue")
    s.launch_host_func(boom, None)
    with other:
        y = cp.ones(3) * 2
    other.synchronize()                 # other streams are unaffected
    with pytest.raises(ZeroDivisionError, match="inside the queue"):
        s.synchronize()
    s.synchronize()                     # reported once; the stream works
    with s:
        assert float((cp.ones(3) + y).sum()) == 9


def test_dropped_streams_release_their_workers():
    def workers():
        return sum(t.name.startswith("cpudevice-stream")
                   for t in threading.enumerate())
    base = workers()
    for _ in range(20):
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            cp.ones(10) + 1
    del s
    gc.collect()
    assert wait_until(lambda: workers() <= base)


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


def test_where_chooses_elementwise_and_keeps_the_dtype():
    x = cp.arange(6, dtype=cp.float32)
    r = cp.where(x > 2, x, cp.zeros(6, cp.float32))
    assert r.dtype == numpy.float32
    assert r.get().tolist() == [0, 0, 0, 3, 4, 5]
    assert cp.where(x < 1, 1.0, x).get().tolist() == [1, 1, 2, 3, 4, 5]
