"""The CPU device model's runtime behaves as CuPy 14.2's where the issue
"CuPy's behaviour where the model differs today" found it did not: the
per-thread default stream, stream callbacks and priorities, capture across
streams and capture's rules, the device properties' keys, the per-thread
current device, and the current stream after ``with`` and ``use()``.
Ordering is tested with gates, never with timing."""
import gc
import re
import threading

import numpy
import pytest

import src.cpudevice as cp
import subproc
from modelkit import (WAIT_S, Gate, graph_node_count, open_all_gates,
                      open_queue_names, thread_ptds_queue_name, wait_until)

CUDAError = cp.cuda.runtime.CUDARuntimeError


@pytest.fixture(autouse=True)
def _gates_open_after_each_test():
    yield
    open_all_gates()


def in_thread(fn):
    """Run ``fn`` on a new host thread; return its result (or raise)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:      # handed to the test's thread
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join(WAIT_S)
    assert not t.is_alive(), "the thread did not finish"
    if "error" in out:
        raise out["error"]
    return out["value"]


def status_of(excinfo):
    return excinfo.value.status


# -- the per-thread default stream --------------------------------------------
def test_ptds_is_cupys_per_thread_stream_object():
    ptds = cp.cuda.Stream.ptds
    assert ptds.ptr == cp.cuda.runtime.streamPerThread == 2
    assert ptds.device_id == -1
    assert cp.cuda.Stream(ptds=True) == ptds
    assert cp.cuda.Stream(ptds=True) != cp.cuda.Stream.null
    assert cp.cuda.Stream(null=True, ptds=True) == cp.cuda.Stream.null
    assert not ptds.is_non_blocking
    assert ptds.priority == 0
    with ptds:
        assert cp.cuda.get_current_stream() is ptds
        x = cp.arange(5) * 2
    assert ptds.use() is ptds
    assert cp.cuda.get_current_stream() is ptds
    cp.cuda.Stream.null.use()
    assert x.get().tolist() == [0, 2, 4, 6, 8]


def test_ptds_work_is_ordered_per_host_thread():
    """Held in this thread, the per-thread stream still runs another
    thread's work: each thread has its own."""
    x = cp.ones(4)
    x.get()                 # ready before the gate: the legacy stream that
    gate = Gate().hold_stream(cp.cuda.Stream.ptds)     # made it would wait
    with cp.cuda.Stream.ptds:
        y = x * 3                       # behind this thread's gate
        mine = cp.cuda.Stream.ptds.record()

    def other_thread():
        # All on this thread's ptds: a read through the legacy stream would
        # wait for the other thread's ptds too, as CUDA's would.
        with cp.cuda.Stream.ptds:
            z = x + 1
            cp.cuda.Stream.ptds.synchronize()
            return z.get().tolist(), thread_ptds_queue_name()

    got, name = in_thread(other_thread)
    assert got == [2.0] * 4
    assert name != thread_ptds_queue_name()
    assert not mine.done and not cp.cuda.Stream.ptds.done
    gate.open()
    mine.synchronize()
    assert y.get().tolist() == [3.0] * 4


def test_a_threads_ptds_is_destroyed_when_the_thread_ends():
    name = in_thread(lambda: (cp.ones(2, dtype=cp.float32),
                              cp.cuda.Stream.ptds.synchronize(),
                              thread_ptds_queue_name())[-1])
    gc.collect()
    assert wait_until(lambda: name not in open_queue_names())


def held_waits_for(held, other):
    """With ``held`` stopped at a gate, does an event recorded next on
    ``other`` wait for it? (A non-blocking stream's event, beside it, must
    not: that shows the gate really holds only ``held``.)"""
    free = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(held)
    after = other.record()
    beside = free.record()
    assert wait_until(lambda: beside.done)
    waits = not after.done
    gate.open()
    after.synchronize()
    return waits


def test_ptds_is_blocking_with_respect_to_the_legacy_stream():
    """As cudaStreamPerThread: the legacy null stream waits for it and it
    waits for the legacy stream; a non-blocking stream waits for neither."""
    assert held_waits_for(cp.cuda.Stream.ptds, cp.cuda.Stream.null)
    assert held_waits_for(cp.cuda.Stream.null, cp.cuda.Stream.ptds)


def test_ptds_does_not_synchronize_with_other_blocking_streams():
    blocking = cp.cuda.Stream()
    gate = Gate().hold_stream(blocking)
    ev = cp.cuda.Stream.ptds.record()
    assert wait_until(lambda: ev.done)
    assert not blocking.done
    gate.open()
    blocking.synchronize()


def test_without_the_variable_the_default_stream_is_the_null_stream():
    cur = in_thread(cp.cuda.get_current_stream)
    assert cur is cp.cuda.Stream.null


def test_per_thread_default_stream_variable_makes_ptds_the_default():
    code = """
import threading
import src.cpudevice as cp
from src.cpudevice.cuda import stream as st
assert cp.cuda.get_current_stream() is cp.cuda.Stream.ptds
assert st.get_current_stream_ptr() == 2
box = []
t = threading.Thread(target=lambda: box.append(cp.cuda.get_current_stream()))
t.start(); t.join(20)
assert box == [cp.cuda.Stream.ptds]
opened = threading.Event()
cp.cuda.Stream.ptds.launch_host_func(lambda _: opened.wait(20), None)
x = cp.ones(3) + 1                     # the default stream: this ptds
with cp.cuda.Stream.null:              # CuPy sends Stream.null's work here too
    assert st.get_current_stream_ptr() == 2
    y = x * 2
ev = cp.cuda.get_current_stream().record()
assert not ev.done
assert cp.cuda.Stream.null.done        # the legacy stream has nothing queued
opened.set()
print(y.get().tolist())
"""
    r = subproc.run_code(code, backend="cpu",
                         env={"CUPY_CUDA_PER_THREAD_DEFAULT_STREAM": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[4.0, 4.0, 4.0]"


# -- add_callback and priority ------------------------------------------------
def test_add_callback_calls_back_with_stream_status_and_arg():
    s = cp.cuda.Stream()
    gate = Gate().hold_stream(s)
    called = threading.Event()
    got = []

    def callback(stream, status, arg):
        got.append((stream, status, arg))
        called.set()
    s.add_callback(callback, {"n": 1})
    assert not called.is_set()          # after the work queued before it
    gate.open()
    assert called.wait(WAIT_S)
    s.synchronize()
    assert got == [(s, 0, {"n": 1})] and got[0][0] is s


def test_add_callback_cannot_be_captured():
    s = cp.cuda.Stream(non_blocking=True)
    s.begin_capture()
    with pytest.raises(CUDAError) as e:
        s.add_callback(lambda *a: None, None)
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureUnsupported
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()


def test_priority_is_reported_as_cuda_clamps_it():
    assert cp.cuda.Stream().priority == 0
    assert cp.cuda.Stream(priority=-1).priority == -1
    assert cp.cuda.Stream(priority=-100).priority == -5    # H100: 0 to -5
    assert cp.cuda.Stream(priority=7).priority == 0
    assert cp.cuda.Stream(non_blocking=True, priority=-2).priority == -2
    assert cp.cuda.Stream.null.priority == 0


# -- capture across streams ---------------------------------------------------
def fork_join(s, side, x):
    """In a capture on ``s``: fork to ``side``, which computes ``y``, and join
    back; return ``y``."""
    x += 1
    side.wait_event(s.record())
    with side:
        y = x * 2
    s.wait_event(side.record())
    x += y
    return y


def test_capture_forks_and_joins_across_streams_and_replays():
    s = cp.cuda.Stream(non_blocking=True)
    side = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(4, dtype=cp.float32)
    cp.cuda.Stream.null.synchronize()   # s is non-blocking: x is ready first
    with s:
        s.begin_capture()
        y = fork_join(s, side, x)
        assert side.is_capturing()      # the fork brought it in
        g = s.end_capture()
    assert not side.is_capturing() and not s.is_capturing()
    assert graph_node_count(g) >= 3
    s.synchronize()
    assert x.get().tolist() == [1.0] * 4          # recorded, not run
    g.launch(s)
    s.synchronize()
    assert y.get().tolist() == [4.0] * 4
    assert x.get().tolist() == [6.0] * 4          # 1 + 1, + 2 * 2
    g.launch(s)
    s.synchronize()
    assert x.get().tolist() == [6 + 1 + 14.0] * 4


def test_a_fork_not_joined_fails_the_capture():
    s = cp.cuda.Stream(non_blocking=True)
    side = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(2)
    s.begin_capture()
    side.wait_event(s.record())
    with side:
        x *= 2
    with pytest.raises(CUDAError) as e:
        s.end_capture()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureUnjoined
    assert not s.is_capturing() and not side.is_capturing()


def test_end_capture_on_the_forked_stream_is_unmatched():
    s = cp.cuda.Stream(non_blocking=True)
    side = cp.cuda.Stream(non_blocking=True)
    s.begin_capture()
    side.wait_event(s.record())
    with pytest.raises(CUDAError) as e:
        side.end_capture()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureUnmatched
    s.wait_event(side.record())
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()


def test_waiting_on_an_event_from_outside_the_capture_is_isolation():
    s = cp.cuda.Stream(non_blocking=True)
    outside = cp.cuda.Stream().record()
    s.begin_capture()
    with pytest.raises(CUDAError) as e:
        s.wait_event(outside)
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureIsolation
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()


def test_the_per_thread_stream_can_be_captured():
    """CuPy refuses only the legacy stream (handles 0 and 1)."""
    x = cp.zeros(3)
    ptds = cp.cuda.Stream.ptds
    with ptds:
        ptds.begin_capture()
        x += 5
        g = ptds.end_capture()
    g.launch(ptds)
    ptds.synchronize()
    assert x.get().tolist() == [5.0] * 3


# -- capture's rules ----------------------------------------------------------
def test_the_legacy_stream_cannot_be_captured():
    for null in (cp.cuda.Stream.null, cp.cuda.Stream(null=True)):
        with pytest.raises(RuntimeError,
                           match=r"cannot capture on the default \(legacy\) "
                                 "stream"):
            null.begin_capture()
        assert not null.is_capturing()


def test_querying_a_capturing_stream_invalidates_the_capture():
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(2)
    cp.cuda.Stream.null.synchronize()
    with s:
        s.begin_capture()
        x += 1
        assert s.done is False      # CuPy returns cudaStreamQuery's error
        with pytest.raises(CUDAError) as e:
            s.end_capture()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureInvalidated
    assert not s.is_capturing()
    with s:                         # the stream stays usable
        x += 1
    s.synchronize()
    assert x.get().tolist() == [2.0, 2.0]


def test_querying_an_event_recorded_in_the_capture_invalidates_it():
    s = cp.cuda.Stream(non_blocking=True)
    s.begin_capture()
    ev = s.record()
    assert ev.done is False
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()


def test_synchronizing_on_a_captured_event_is_refused_and_invalidates():
    s = cp.cuda.Stream(non_blocking=True)
    s.begin_capture()
    ev = s.record()
    with pytest.raises(CUDAError) as e:
        ev.synchronize()
    assert status_of(e) == cp.cuda.runtime.errorCapturedEvent
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()
    with pytest.raises(CUDAError) as e:     # it marks no work that runs
        cp.cuda.get_elapsed_time(ev, ev)
    assert status_of(e) == cp.cuda.runtime.errorCapturedEvent


def test_synchronizing_a_capturing_stream_is_unsupported():
    s = cp.cuda.Stream(non_blocking=True)
    s.begin_capture()
    with pytest.raises(CUDAError) as e:
        s.synchronize()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureUnsupported
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()


def test_synchronizing_the_device_during_a_capture_is_unsupported():
    """A device handle encompasses the capturing stream (CUDA's rule)."""
    s = cp.cuda.Stream(non_blocking=True)
    s.begin_capture()
    with pytest.raises(CUDAError) as e:
        cp.cuda.Device().synchronize()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureUnsupported
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()


def test_legacy_stream_use_while_a_blocking_stream_captures_is_implicit():
    s = cp.cuda.Stream()                # blocking
    s.begin_capture()
    with pytest.raises(CUDAError) as e:
        cp.cuda.Stream.null.record()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureImplicit
    with pytest.raises(CUDAError, match="cudaErrorStreamCaptureInvalidated"):
        s.end_capture()
    cp.cuda.Stream.null.synchronize()   # usable again once it has ended


IMPLICIT = ("cudaErrorStreamCaptureImplicit: operation would make the legacy "
            "stream depend on a capturing blocking stream")


def test_synchronizing_the_legacy_stream_during_a_blocking_capture():
    """cudaStreamSynchronize on the legacy stream fails at that call with
    CuPy's CUDARuntimeError (its message as CuPy's) and invalidates the
    capture, which end_capture then reports."""
    s = cp.cuda.Stream()                # blocking
    with s:
        s.begin_capture()
        with pytest.raises(CUDAError) as e:
            cp.cuda.Stream.null.synchronize()
        assert status_of(e) == cp.cuda.runtime.errorStreamCaptureImplicit
        assert str(e.value).startswith(IMPLICIT)
        with pytest.raises(CUDAError) as e:
            s.end_capture()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureInvalidated
    assert not s.is_capturing()
    cp.cuda.Stream.null.synchronize()   # usable again once it has ended


def test_querying_the_legacy_stream_during_a_blocking_capture():
    """CuPy's ``done`` is cudaStreamQuery(...) == cudaSuccess: on the legacy
    stream it is False (the query's error is not raised), and the query
    invalidates the capture."""
    s = cp.cuda.Stream()                # blocking
    s.begin_capture()
    assert cp.cuda.Stream.null.done is False
    with pytest.raises(CUDAError) as e:
        s.end_capture()
    assert status_of(e) == cp.cuda.runtime.errorStreamCaptureInvalidated
    assert cp.cuda.Stream.null.done is True     # nothing queued on it


def test_asking_the_legacy_stream_if_it_captures_leaves_the_capture_valid():
    """cudaStreamIsCapturing on the legacy stream during a blocking capture
    fails (CuPy raises it) but invalidates nothing: the capture ends and
    replays (as CuPy's test_null_stream_cannot_capture, test_cupy_graph)."""
    s = cp.cuda.Stream()                # blocking
    x = cp.zeros(2)
    x.get()
    with s:
        s.begin_capture()
        x += 1
        with pytest.raises(CUDAError) as e:
            cp.cuda.Stream.null.is_capturing()
        assert str(e.value).startswith(IMPLICIT)
        g = s.end_capture()
    g.launch(s)
    s.synchronize()
    assert x.get().tolist() == [1.0, 1.0]
    side = cp.cuda.Stream(non_blocking=True)    # only blocking ones count
    side.begin_capture()
    assert cp.cuda.Stream.null.is_capturing() is False
    side.end_capture()


def test_matmul_is_refused_in_capture_as_cublas_is():
    s = cp.cuda.Stream(non_blocking=True)
    a = cp.ones((3, 3), dtype=cp.float32)
    ai = cp.ones((3, 3), dtype=cp.int32)
    cp.cuda.Stream.null.synchronize()
    with s:
        s.begin_capture()
        for call in (lambda: cp.matmul(a, a), lambda: a @ a,
                     lambda: cp.dot(a, a)):
            with pytest.raises(NotImplementedError,
                               match="calling cuBLAS API during stream "
                                     "capture is currently unsupported"):
                call()
        c = cp.matmul(ai, ai)           # integers: CuPy's own kernel
        g = s.end_capture()             # the refusals left it valid
    g.launch(s)
    s.synchronize()
    assert c.get().tolist() == [[3] * 3] * 3
    assert cp.matmul(a, a).get().tolist() == [[3.0] * 3] * 3


def test_cupy_random_is_refused_in_capture_as_curand_is():
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        s.begin_capture()
        for call in (lambda: cp.random.rand(4), lambda: cp.random.randn(4),
                     lambda: cp.random.uniform(size=3),
                     lambda: cp.random.randint(0, 5, size=2)):
            with pytest.raises(NotImplementedError,
                               match="calling cuRAND API during stream "
                                     "capture is currently unsupported"):
                call()
        s.end_capture()
    assert cp.random.rand(4).shape == (4,)


# -- device properties --------------------------------------------------------
CUPY_KEYS = """name totalGlobalMem sharedMemPerBlock regsPerBlock warpSize
maxThreadsPerBlock maxThreadsDim maxGridSize clockRate totalConstMem major
minor textureAlignment texturePitchAlignment multiProcessorCount
kernelExecTimeoutEnabled integrated canMapHostMemory computeMode maxTexture1D
maxTexture2D maxTexture3D concurrentKernels ECCEnabled pciBusID pciDeviceID
pciDomainID tccDriver memoryClockRate memoryBusWidth l2CacheSize
maxThreadsPerMultiProcessor isMultiGpuBoard cooperativeLaunch
cooperativeMultiDeviceLaunch asyncEngineCount unifiedAddressing
streamPrioritiesSupported globalL1CacheSupported localL1CacheSupported
sharedMemPerMultiprocessor regsPerMultiprocessor managedMemory
multiGpuBoardGroupID hostNativeAtomicSupported pageableMemoryAccess
concurrentManagedAccess computePreemptionSupported
canUseHostPointerForRegisteredMem sharedMemPerBlockOptin
pageableMemoryAccessUsesHostPageTables directManagedMemAccessFromHost
persistingL2CacheMaxSize maxBlocksPerMultiProcessor accessPolicyMaxWindowSize
reservedSharedMemPerBlock""".split()


def test_device_properties_have_cupys_keys_with_h100_values():
    p = cp.cuda.runtime.getDeviceProperties(0)
    assert set(CUPY_KEYS) <= set(p)
    assert p["maxThreadsDim"] == (1024, 1024, 64)
    assert p["maxGridSize"] == (2147483647, 65535, 65535)
    assert p["regsPerBlock"] == 65536
    assert p["totalConstMem"] == 65536
    assert p["maxThreadsPerMultiProcessor"] == 2048
    assert p["computeMode"] == 0
    assert p["ECCEnabled"] == 1
    assert p["multiProcessorCount"] == 132
    assert isinstance(p["name"], bytes)
    assert p["pciDeviceID"] == 0
    assert cp.cuda.runtime.getDeviceProperties(1)["pciDeviceID"] == 1


def test_a_profile_without_properties_gets_cudas_defaults():
    from modelkit import hardware
    old = hardware.profile
    hardware.set_profile({k: v for k, v in old.data.items()
                          if k != "properties"})
    try:
        p = cp.cuda.runtime.getDeviceProperties(0)
    finally:
        hardware.set_profile(old)
    assert set(CUPY_KEYS) <= set(p)
    assert p["name"].startswith(b"CPU device model")
    assert p["warpSize"] == 32 and p["maxThreadsPerBlock"] == 1024
    assert p["computeMode"] == 0            # cudaComputeModeDefault
    assert p["concurrentKernels"] == 1 and p["asyncEngineCount"] == 2
    # resident threads per SM, which pipeline.kernels_at_once bounds by:
    # 2048 on every data-centre GPU since the P100
    assert p["maxThreadsPerMultiProcessor"] == 2048
    # only a host coherent with the device (NVLink-C2C) reaches managed
    # memory directly or through its own page tables; not a PCIe host
    assert p["directManagedMemAccessFromHost"] == 0
    assert p["pageableMemoryAccess"] == 0
    assert p["integrated"] == 1             # device memory is host RAM
    assert cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"] \
        == old.properties["multiProcessorCount"]


def test_pci_bus_ids_are_cudas_strings_and_name_their_devices():
    """``Device.pci_bus_id`` is a str, ``domain:bus:device.function`` in
    hexadecimal, as CUDA writes it (``0000:3B:00.0`` on a GPU); each
    device's is its own, and ``Device.from_pci_bus_id`` finds it again."""
    ids = [cp.cuda.Device(i).pci_bus_id
           for i in range(cp.cuda.runtime.getDeviceCount())]
    assert len(set(ids)) == len(ids)
    for i, bus_id in enumerate(ids):
        assert re.fullmatch(r"[0-9A-F]{4}:[0-9A-F]{2}:[0-9A-F]{2}\.0", bus_id)
        assert bus_id == cp.cuda.runtime.deviceGetPCIBusId(i)
        assert cp.cuda.Device.from_pci_bus_id(bus_id) == cp.cuda.Device(i)
        assert cp.cuda.runtime.deviceGetByPCIBusId(bus_id.lower()) == i
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="cudaErrorInvalidValue"):
        cp.cuda.runtime.deviceGetByPCIBusId("0000:FF:1F.0")


# -- the current device is per thread -----------------------------------------
def test_device_use_returns_the_device():
    d = cp.cuda.Device(1)
    try:
        assert d.use() is d
        assert cp.cuda.runtime.getDevice() == 1
    finally:
        cp.cuda.Device(0).use()


def test_current_device_and_the_with_stack_are_per_thread():
    d1 = cp.cuda.Device(1)
    entered, leave = threading.Event(), threading.Event()

    def other_thread():
        assert cp.cuda.runtime.getDevice() == 0     # a new thread's own
        d1.use()
        with d1:                # the same Device object, from device 1
            entered.set()
            assert leave.wait(WAIT_S)
        return cp.cuda.runtime.getDevice()

    assert cp.cuda.runtime.getDevice() == 0
    with d1:                    # from device 0
        t_result = {}
        t = threading.Thread(
            target=lambda: t_result.setdefault("dev", other_thread()))
        t.start()
        assert entered.wait(WAIT_S)
        assert cp.cuda.runtime.getDevice() == 1
    # leaving restores this thread's device, not the other thread's
    assert cp.cuda.runtime.getDevice() == 0
    leave.set()
    t.join(WAIT_S)
    assert t_result["dev"] == 1
    assert cp.cuda.runtime.getDevice() == 0


def test_current_stream_is_the_current_devices_by_default():
    with cp.cuda.Device(1):
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            assert cp.cuda.get_current_stream() is s
            assert cp.cuda.get_current_stream(1) is s
            assert cp.cuda.get_current_stream(0) is not s
    assert cp.cuda.get_current_stream() is not s


# -- the current stream after `with` and use() --------------------------------
def test_leaving_a_with_block_restores_the_enclosing_blocks_stream():
    s1, s2, s3 = cp.cuda.Stream(), cp.cuda.Stream(), cp.cuda.Stream()
    null = cp.cuda.Stream.null
    with s1:
        s3.use()
        assert cp.cuda.get_current_stream() is s3
        with s2:
            assert cp.cuda.get_current_stream() is s2
        assert cp.cuda.get_current_stream() is s1   # not s3: CuPy's stack
        s3.use()
    assert cp.cuda.get_current_stream() is null
    # use() outside any block does not push: a block after it returns to
    # the bottom of the stack, the default stream, as CuPy does
    s3.use()
    try:
        with s1:
            pass
        assert cp.cuda.get_current_stream() is null
    finally:
        null.use()


def test_the_current_stream_is_per_thread():
    s = cp.cuda.Stream()
    with s:
        other = in_thread(cp.cuda.get_current_stream)
        assert cp.cuda.get_current_stream() is s
    assert other is cp.cuda.Stream.null


def test_stream_work_on_each_thread_goes_to_its_own_current_stream():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    x = cp.ones(3)
    with s:
        y = x + 1                               # behind the gate

    def other():
        z = x * 5                               # the null stream, not s
        return z.get().tolist()
    assert in_thread(other) == [5.0] * 3
    gate.open()
    s.synchronize()
    assert numpy.array_equal(y.get(), [2.0] * 3)
