"""Events and the profiler on the CPU device model (`cupy.cuda.Event`,
`cupyx.profiler`): an event is stamped when its stream reaches it, waits
order work across streams, and benchmark times are the device's."""
import sys
import time
from unittest import mock

import numpy
import pytest

import src.cpudevice as cp
import src.cpudevice.cupyx as cpx
from modelkit import Gate, wait_until


def spin(seconds):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pass


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


def test_event_on_idle_stream_is_stamped_when_recorded_not_when_run():
    stream = cp.cuda.Stream(non_blocking=True)
    stream.record().synchronize()           # the worker is up and idle
    start, end = cp.cuda.Event(), cp.cuda.Event()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(10.0)   # the worker runs only once the host waits
    try:
        start.record(stream)
        spin(0.05)
        end.record(stream)
        end.synchronize()
    finally:
        sys.setswitchinterval(interval)
    assert cp.cuda.get_elapsed_time(start, end) >= 45


def test_event_after_work_is_stamped_when_the_work_finished():
    stream = cp.cuda.Stream(non_blocking=True)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record(stream)
    stream.launch_host_func(time.sleep, 0.05)
    end.record(stream)
    end.synchronize()
    assert 45 <= cp.cuda.get_elapsed_time(start, end) < 1000


def test_event_behind_a_dependency_is_stamped_when_it_was_met():
    busy = cp.cuda.Stream(non_blocking=True)
    waiting = cp.cuda.Stream(non_blocking=True)
    start = busy.record()
    busy.launch_host_func(time.sleep, 0.05)
    waiting.wait_event(busy.record())
    end = waiting.record()
    end.synchronize()
    assert cp.cuda.get_elapsed_time(start, end) >= 45


def test_profiler_reads_get_elapsed_time_at_the_call():
    # CuPy's own test patches cupy.cuda.get_elapsed_time (in milliseconds)
    with mock.patch.object(cp.cuda, "get_elapsed_time", return_value=2500):
        r = cpx.profiler.benchmark(lambda: None, n_repeat=3, n_warmup=1)
    numpy.testing.assert_array_equal(r.gpu_times, [[2.5, 2.5, 2.5]])


def test_benchmark_times_are_seconds_matching_a_known_host_wait():
    import time
    nap = 0.02
    r = cpx.profiler.benchmark(time.sleep, (nap,), n_repeat=3, n_warmup=0)
    cpu, gpu = r.cpu_times, r.gpu_times[0]
    assert cpu.shape == gpu.shape == (3,)
    assert (cpu >= nap).all() and (cpu < 2.0).all()
    # the idle device's events are recorded before and after the nap, so the
    # device interval spans it: about the nap, in seconds, on a GPU too
    assert (gpu >= 0.5 * nap).all(), gpu
    assert (gpu <= cpu + 0.05).all(), (gpu, cpu)


def test_benchmark_gpu_times_bound_a_known_copy_both_ways():
    nbytes = 32 << 20
    src = cpx.empty_pinned(nbytes // 4, numpy.float32)
    src[...] = 1.0
    dst = cp.empty(nbytes // 4, cp.float32)

    def copy():
        dst.set(src)
        cp.cuda.get_current_stream().synchronize()
    r = cpx.profiler.benchmark(copy, n_repeat=3, n_warmup=1)
    cpu, gpu = r.cpu_times, r.gpu_times[0]
    # 32 MiB takes ~0.7 ms at an H100's 50 GB/s and well under a second on
    # any CPU: a time in milliseconds or microseconds would miss these bounds
    assert (gpu > 2e-5).all() and (gpu < 2.0).all(), gpu
    assert (cpu > 2e-5).all() and (cpu < 2.0).all(), cpu
    # the function waits for its copy, so the device interval lies within
    # the host's (on the model the host's also holds the real memcpy), and
    # it is at least the copy: no link moves 32 MiB faster than 1 TB/s
    assert (gpu <= cpu + 0.05).all() and (gpu >= nbytes / 1e12).all(), \
        (gpu, cpu)
    assert str(r).count(" us") >= 2
