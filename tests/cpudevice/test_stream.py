"""Streams on the CPU device model (`cupy.cuda.Stream`): work is queued
and runs in order, the legacy null stream waits for blocking streams,
failures surface at the next synchronization, and nothing leaks. Random
programs over several streams, joined by events, compute what a serial run
computes. Ordering is tested with gates, never with timing."""
import gc
import threading
import weakref

import numpy
import pytest
from hypothesis import given, settings, strategies as st

import src.cpudevice as cp
import src.cpudevice.cupyx as cpx
from modelkit import Gate, pinned_bytes_in_use, wait_until

pool = cp.get_default_memory_pool()

N = 64
OPS = ["add", "mul", "scale", "copy"]

op = st.tuples(st.sampled_from(OPS), st.integers(0, 3), st.integers(0, 3),
               st.integers(0, 2))
program = st.lists(op, min_size=1, max_size=40)


def run(prog, n_streams, serial):
    """Run ``prog`` on 4 arrays; each op on stream ``k`` (or one stream),
    after waiting for the last writer of each array it touches."""
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    host = [numpy.full(N, i + 1.0) for i in range(4)]
    arrays = [cp.asarray(h, blocking=True) for h in host]
    last = [None] * 4          # event after the last write/read per array
    for name, dst, src, k in prog:
        s = streams[0 if serial else k % n_streams]
        for i in {dst, src}:
            if last[i] is not None:
                s.wait_event(last[i])
        with s:
            a, b = arrays[dst], arrays[src]
            if name == "add":
                cp.add(a, b, out=a)
            elif name == "mul":
                cp.multiply(a, 0.5, out=a)
                cp.add(a, b, out=a)
            elif name == "scale":
                a *= 1.25
            else:
                a[...] = b
            ev = s.record()
        last[dst] = last[src] = ev
    for s in streams:
        s.synchronize()
    return [a.get() for a in arrays]


def model_threads():
    return sum(t.name.startswith("cpudevice-") for t in threading.enumerate())


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
    try:
        s2.use()
        assert cp.cuda.get_current_stream() == s2
    finally:
        cp.cuda.Stream.null.use()      # a failed assert must not leak s2


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


def test_stream_errors_are_cuda_runtime_errors():
    s = cp.cuda.Stream()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="cudaErrorIllegalState"):
        s.end_capture()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="cudaErrorInvalidResourceHandle"):
        cp.cuda.get_elapsed_time(cp.cuda.Event(), cp.cuda.Event())


@settings(max_examples=25, deadline=None)
@given(program)
def test_streams_joined_by_events_compute_what_serial_code_computes(prog):
    expected = run(prog, 1, serial=True)
    got = run(prog, 3, serial=False)
    for e, g in zip(expected, got):
        numpy.testing.assert_array_equal(g, e)


def test_threads_pool_and_pinned_bytes_return_to_baseline():
    pool = cp.get_default_memory_pool()
    ppool = cp.get_default_pinned_memory_pool()
    gc.collect()
    used0 = pool.used_bytes()
    for i in range(200):
        s = cp.cuda.Stream(non_blocking=True)
        e = cp.cuda.Event()
        with s:
            x = cp.ones(1000) * i
            h = cpx.empty_pinned(1000)
            x.get(out=h)
            e.record()
        e.synchronize()
    del s, e, x, h
    gc.collect()
    assert pool.used_bytes() == used0
    ppool.free_all_blocks()
    pool.free_all_blocks()
    assert pinned_bytes_in_use() == 0
    assert wait_until(lambda: model_threads() <= 1)   # at most the null's


# -- the CUDA stream protocol, Stream.from_external, ExternalStream ---------

class ForeignStream:
    """Another library's stream: it speaks only ``__cuda_stream__``."""

    def __init__(self, ptr, version=0):
        self.ptr, self.version = ptr, version

    def __cuda_stream__(self):
        return (self.version, self.ptr)


def test_cuda_stream_gives_version_0_and_the_handle():
    s = cp.cuda.Stream()
    for stream in (s, cp.cuda.Stream.null, cp.cuda.Stream.ptds):
        assert stream.__cuda_stream__() == (0, stream.ptr)


@pytest.mark.parametrize("foreign", ["mock", "cupy"])
def test_from_external_queues_on_the_same_stream(foreign):
    real = cp.cuda.Stream(non_blocking=True)
    foreign = ForeignStream(real.ptr) if foreign == "mock" else real
    wrapped = cp.cuda.Stream.from_external(foreign)
    assert (wrapped.ptr, wrapped.device_id) == (real.ptr, -1)
    assert wrapped._foreign_stream_ref is foreign     # CuPy's own attribute
    assert wrapped == real and wrapped.is_non_blocking
    gate = Gate().hold_stream(real)
    with wrapped:
        x = cp.arange(4) + 1
        assert cp.cuda.get_current_stream() == wrapped
    assert not wrapped.done                 # behind the gate, on `real`
    gate.open()
    wrapped.synchronize()
    assert real.done
    numpy.testing.assert_array_equal(x.get(), [1, 2, 3, 4])


@pytest.mark.parametrize("returns, match", [
    (123, "must return a 2-tuple"), ((0,), "must return a 2-tuple"),
    (("0", 1), r"must return \(int, int\)"),
    ((0, "1"), r"must return \(int, int\)"),
    ((1, 12345), "unsupported version"), ((-1, 12345), "unsupported version")])
def test_from_external_refuses_what_cupy_refuses(returns, match):
    class Bad:
        def __cuda_stream__(self):
            return returns
    with pytest.raises(TypeError, match=match):
        cp.cuda.Stream.from_external(Bad())
    with pytest.raises(TypeError, match="does not implement"):
        cp.cuda.Stream.from_external(object())


def test_from_external_keeps_the_foreign_stream_alive_and_never_destroys():
    real = cp.cuda.Stream()
    foreign = ForeignStream(real.ptr)
    ref = weakref.ref(foreign)
    wrapped = cp.cuda.Stream.from_external(foreign)
    del foreign
    gc.collect()
    assert ref() is not None
    del wrapped
    gc.collect()
    assert ref() is None
    with real:                              # the stream lives on
        numpy.testing.assert_array_equal((cp.ones(2) * 3).get(), [3, 3])


def test_an_unknown_handle_fails_at_first_use():
    wrapped = cp.cuda.Stream.from_external(ForeignStream(987654321))
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="invalid resource handle"):
        wrapped.synchronize()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="invalid resource handle"):
        cp.cuda.runtime.streamSynchronize(987654321)


def test_external_stream_is_deprecated_and_queues_on_the_handle():
    before = model_threads()
    ptr = cp.cuda.runtime.streamCreate()
    with pytest.warns(DeprecationWarning, match="ExternalStream is deprec"):
        stream = cp.cuda.ExternalStream(ptr)
    assert (stream.ptr, stream.device_id) == (ptr, -1)
    out = []
    for i in range(20):
        cp.arange(3).get(stream=stream)
        stream.add_callback(lambda s, status, i: out.append(i), i)
    stream.launch_host_func(out.append, "last")
    cp.cuda.runtime.streamSynchronize(ptr)
    assert out == list(range(20)) + ["last"]
    cp.cuda.runtime.streamDestroy(ptr)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError):
        cp.cuda.runtime.streamDestroy(ptr)
    assert wait_until(lambda: model_threads() <= before)
