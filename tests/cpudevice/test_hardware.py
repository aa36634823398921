"""The simulated hardware: device profile, cost model, device clock.

The calibrated model must reproduce the H100's *device-only* effects within
a factor of 2 (book/reference/nvidia-h100.json). Every time is read on the
device clock (events). The profile is used with every cost 100 times as
long (`Profile.scaled`): that keeps every ratio of the model, and makes the
modelled times dominate both the host's time to issue the work and this
machine's real work, so the tests read the model, not the machine's load.
"""
import gc
import threading
import time

import numpy as np
import pytest

import subproc
from modelkit import Gate, wait_until
from src import BACKEND, cp, cpx, pipeline, timeline
from src.timeline import Timeline

pytestmark = pytest.mark.skipif(BACKEND != "cpu",
                                reason="checks the CPU device model")
if BACKEND == "cpu":
    from modelkit import (compute_engine_busy, globaltimer_inside,
                          hardware)

SLOW = 100              # every device cost 100 times as long
H100 = {"pinned_pageable": 5.98, "copy_kernel": 14.5, "v1": 1.20,
        "v2": 1.18, "pageable_nb_b": 0.83}      # the H100's values


def within_2x(value, reference):
    return reference / 2 <= value <= reference * 2


_ARENA = []


def arena():
    """A stream of the tests' own: the pool caches the blocks of arrays
    made on it for it alone, so that they are never handed to a later
    test's allocation on the default stream (which counts device memory),
    nor returned to the C library (which counts host memory)."""
    if not _ARENA:
        _ARENA.append(cp.cuda.Stream(non_blocking=True))
    return _ARENA[0]


def empty(n):
    """A float32 device array, cached in `arena`'s pool."""
    with arena():
        return cp.empty(n, cp.float32)


@pytest.fixture(autouse=True)
def release_memory():
    """Leave the pinned pool as found."""
    yield
    cp.cuda.Device().synchronize()
    cp.get_default_pinned_memory_pool().free_all_blocks()


@pytest.fixture
def profile():
    """Set a profile for one test: ``profile(time=, copies=)``."""
    old = hardware.profile

    def use(time=SLOW, copies=1.0):
        hardware.set_profile(old.scaled(time, copies))
    yield use
    hardware.set_profile(old)


def event_ms(stream, issue, repeat=3):
    """Device milliseconds of the work ``issue()`` queues on ``stream``, the
    fastest of ``repeat`` runs (the host can only add time)."""
    best = float("inf")
    for _ in range(repeat):
        start = stream.record()
        issue()
        end = stream.record()
        end.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(start, end))
    return best


def overlap_demo(versions=("sequential", "v1", "v2"), repeat=3):
    """NVIDIA's demo (4 streams of a million floats): the fastest makespan
    of ``repeat`` runs of each version, in ms."""
    chunk, n_streams = 4 * 1024 * 256, 4
    a = cpx.zeros_pinned(chunk * n_streams, dtype=np.float32)
    d_a = empty(a.size)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    ms = {v: float("inf") for v in versions}
    for v in [v for v in versions for _ in range(repeat)]:
        if v == "sequential":
            tl = Timeline([cp.cuda.Stream.null])
            pipeline.sequential(pipeline.overlap_stages(a, d_a, 1),
                                timeline=tl)
            ops = tl.ops()
        else:
            ops = pipeline.measure(pipeline.overlap_stages(a, d_a, n_streams),
                                   n_streams, streams, v)
        ms[v] = min(ms[v], timeline.makespan(ops))
    cp.cuda.Device().synchronize()
    return ms


def test_properties_report_the_profile():
    p = cp.cuda.runtime.getDeviceProperties(0)
    prof = hardware.profile
    assert p["name"] == f"CPU device model ({prof.name} profile)".encode()
    assert p["asyncEngineCount"] == prof.properties["asyncEngineCount"]
    assert p["multiProcessorCount"] == prof.properties["multiProcessorCount"]
    assert p["totalGlobalMem"] == hardware.CAPACITY


def test_another_profile_is_chosen_with_book_cpu_profile(tmp_path):
    data = hardware.profile.data | {"name": "tiny"}
    data["properties"] = dict(data["properties"], asyncEngineCount=1)
    path = tmp_path / "tiny.json"
    path.write_text(__import__("json").dumps(data))
    code = ("from src import cp; p = cp.cuda.runtime.getDeviceProperties(0)"
            "; print(p['name'].decode(), p['asyncEngineCount'])")
    out = subproc.run_code(code, backend="cpu",
                           env={"BOOK_CPU_PROFILE": str(path)})
    assert out.stdout.split() == ["CPU", "device", "model", "(tiny",
                                  "profile)", "1"], out.stderr


def test_the_profiles_rates_are_read_in_the_units_their_keys_name():
    """A kernel of F x 10^12 x 2 flops on a profile of F TFLOPS works 2 s,
    one moving B x 10^9 x 2 bytes at B GB/s too, and so do a pinned copy at
    the link's GB/s and pageable staging at the host's: exactly, as the
    units say (the times the book compares with a GPU's rest on them)."""
    prof = hardware.profile
    kern, copy = prof.data["kernel"], prof.data["copy"]
    two = pytest.approx(2.0, rel=1e-15)
    assert prof.kernel_cost(flops=2e12 * kern["flops_tflops"])[1] == two
    assert prof.kernel_cost(nbytes=2e9 * kern["memory_gbps"])[1] == two
    assert prof.copy_cost(2e9 * copy["h2d_pinned_gbps"], "H2D")[1] == two
    assert prof.copy_cost(2e9 * copy["d2h_pinned_gbps"], "D2H")[1] == two
    assert prof.stage_cost(
        2e9 * prof.data["host"]["pageable_stage_gbps"]) == two


def test_a_profile_scaled_only_in_its_copies_keeps_its_kernels():
    """``scaled(copies=10)``: copies (latency, bandwidth, pageable staging)
    ten times as fast; kernels, launches and the host's costs as they
    were (the default ``time`` leaves every device time alone)."""
    prof = hardware.profile
    fast = prof.scaled(copies=10)
    n = 1 << 20
    assert fast.kernel_cost(n, 1e9) == prof.kernel_cost(n, 1e9)
    assert fast.graph_launch_s == prof.graph_launch_s
    for direction in ("H2D", "D2H"):
        lat, work = prof.copy_cost(n, direction)
        assert fast.copy_cost(n, direction) == (pytest.approx(lat / 10),
                                                pytest.approx(work / 10))
    assert fast.stage_cost(n) == pytest.approx(prof.stage_cost(n) / 10)
    assert fast.issue == prof.issue
    assert fast.module_load_s == prof.module_load_s


def test_device_time_follows_the_cost_model(profile):
    profile()
    prof = hardware.profile
    s = cp.cuda.Stream(non_blocking=True)
    host = cpx.zeros_pinned(1 << 20, np.float32)
    dev = empty(1 << 20)
    ms = event_ms(s, lambda: dev.set(host, stream=s))
    lat, work = prof.copy_cost(host.nbytes, "H2D")
    assert (lat + work) * 1e3 - 1e-6 <= ms < (lat + work) * 1e3 + 2


def test_a_kernels_globaltimer_reads_its_modelled_work_not_the_cpus(
        profile):
    """The twin of a kernel that stamps %globaltimer reads the device clock:
    the span it records is the kernel's modelled work, however long the
    CPU really took, and it lies inside the events around it."""
    from src import kernels
    profile()
    s = cp.cuda.Stream(non_blocking=True)
    a = empty(1 << 20)
    a.fill(0)
    kernels.launch_overlap(a, 0, a.size, stream=s)     # loaded, warm
    stamps = cp.array(np.array([kernels.NEVER, 0], np.uint64))
    start = s.record()
    kernels.launch_overlap(a, 0, a.size, stream=s, stamps=stamps)
    end = s.record()
    end.synchronize()
    first, last = (int(v) for v in stamps.get())
    span_ms = (last - first) / 1e6
    lat, work = hardware.profile.kernel_cost(
        3 * a.nbytes, 0, a.size, "overlap_kernel")
    assert span_ms == pytest.approx(work * 1e3, rel=1e-3)
    assert span_ms <= cp.cuda.get_elapsed_time(start, end)


def test_globaltimer_reads_a_kernels_work_in_nanoseconds():
    """Inside a booked kernel the first read of %globaltimer gives the
    start of its work and every later read its end, in nanoseconds of the
    device clock: exactly, as a GPU's timer counts them."""
    assert globaltimer_inside(1.5, 2.25) == [1_500_000_000, 2_250_000_000,
                                             2_250_000_000]


@pytest.mark.timeout(120)
def test_pinned_against_pageable_h2d_bandwidth(profile):
    profile()
    s = cp.cuda.Stream(non_blocking=True)
    pageable = np.ones(1 << 18, np.float32)             # 1 MiB
    pinned = cpx.empty_like_pinned(pageable)
    dev = empty(pageable.size)
    t_pin = event_ms(s, lambda: dev.set(pinned, stream=s))
    t_page = event_ms(s, lambda: dev.set(pageable, stream=s))
    assert within_2x(t_page / t_pin, H100["pinned_pageable"])


@pytest.mark.timeout(120)
def test_a_copy_against_an_elementwise_kernel_on_the_same_array(profile):
    profile()
    s = cp.cuda.Stream(non_blocking=True)
    host = cpx.zeros_pinned(1 << 21, np.float32)        # 8 MiB
    dev = empty(host.size)
    t_copy = event_ms(s, lambda: dev.set(host, stream=s))

    def add_one():
        with s:
            dev.__iadd__(1)
    t_kernel = event_ms(s, add_one)
    assert within_2x(t_copy / t_kernel, H100["copy_kernel"])


@pytest.mark.timeout(120)
def test_the_overlap_demo_gains_what_it_gains_on_the_h100(profile):
    profile()
    ms = overlap_demo()
    v1 = ms["sequential"] / ms["v1"]
    v2 = ms["sequential"] / ms["v2"]
    assert within_2x(v1, H100["v1"]) and v1 > 1.1, ms
    assert within_2x(v2, H100["v2"]) and v2 > 1.1, ms


@pytest.mark.timeout(120)
def test_faster_copies_leave_less_for_overlap_to_hide(profile):
    """Copies 10 and 100 times as fast: the kernels dominate, so overlapping
    the copies gains less and less, as it would on such a GPU."""
    speedups = []
    for copies in (1, 10, 100):
        profile(copies=copies)
        ms = overlap_demo(("sequential", "v1"))
        speedups.append(ms["sequential"] / ms["v1"])
    assert speedups[0] > speedups[1] + 0.05 > speedups[2] + 0.1, speedups
    assert speedups[2] < 1.15, speedups


@pytest.mark.timeout(120)
def test_non_blocking_alone_frees_the_host_little_for_pageable_memory(
        profile):
    """cp.asarray from pageable memory: blocking=False still stages the
    data on the host; only the copy proper is left to wait for."""
    profile()
    pageable = np.ones(1 << 18, np.float32)             # 1 MiB

    def blocked(blocking):
        """The fastest of 3 calls (the host can only add time), after one
        that warms the staging buffer and the pool up."""
        times = []
        for _ in range(4):
            cp.cuda.Device().synchronize()
            with arena():
                t0 = hardware.clock()
                cp.asarray(pageable, blocking=blocking)
                times.append(hardware.clock() - t0)
        return min(times[1:])
    ratio = blocked(False) / blocked(True)
    assert within_2x(ratio, H100["pageable_nb_b"]) and ratio < 1


def test_two_copies_in_one_direction_take_turns_on_its_engine(profile):
    profile()
    a, b = (cp.cuda.Stream(non_blocking=True) for _ in range(2))
    host = cpx.zeros_pinned(1 << 18, np.float32)
    x, y = empty(host.size), empty(host.size)
    tl = Timeline([a, b])
    with tl.op(a, "H2D"):
        x.set(host, stream=a)
    with tl.op(b, "H2D"):
        y.set(host, stream=b)
    first, second = sorted(tl.ops(engines={}), key=lambda o: o.end)
    assert second.end - first.end >= 0.9 * (first.end - first.ready)


@pytest.mark.parametrize("non_blocking", [False, True])
def test_the_null_stream_waits_for_blocking_streams_on_the_device_clock(
        profile, non_blocking):
    """A copy that really finished long before its modelled end still
    orders the legacy null stream after it, unless its stream is
    non-blocking."""
    profile()
    s = cp.cuda.Stream(non_blocking=non_blocking)
    host = cpx.zeros_pinned(1 << 20, np.float32)        # 4 MiB: ~8 ms
    dev = empty(host.size)
    start = s.record()
    dev.set(host, stream=s)
    copied = s.record()
    after = cp.cuda.Stream.null.record()
    after.synchronize()
    copied.synchronize()
    copy_ms = cp.cuda.get_elapsed_time(start, copied)
    waited = cp.cuda.get_elapsed_time(copied, after) >= 0
    assert copy_ms > 5 and waited != non_blocking


def test_small_kernels_on_different_streams_overlap(profile):
    """Latency-bound kernels share the compute engine: two streams of small
    kernels take about as long as one."""
    profile()
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    with arena():
        xs = [cp.zeros(8, cp.float32) for _ in streams]
    arena().synchronize()       # filled on another stream: nothing orders it
    gate = Gate().hold_stream(streams[0])
    origin = streams[0].record()
    streams[1].wait_event(origin)
    for x, s in zip(xs, streams):
        with s:
            for _ in range(20):
                x += 1
    ends = [s.record() for s in streams]
    gate.open()
    for e in ends:
        e.synchronize()
    one = hardware.profile.kernel_cost(64)
    both = max(cp.cuda.get_elapsed_time(origin, e) for e in ends)
    assert both < 1.5 * 20 * sum(one) * 1e3
    assert all((x.get() == 20).all() for x in xs)


def test_a_host_wait_returns_at_the_modelled_end_without_spinning(profile):
    profile()
    s = cp.cuda.Stream(non_blocking=True)
    host = cpx.zeros_pinned(1 << 20, np.float32)        # 4 MiB: ~8 ms
    dev = empty(host.size)
    cpu0, t0 = time.process_time(), hardware.clock()
    dev.set(host, stream=s)
    end = s.record()
    s.synchronize()
    waited, cpu = hardware.clock() - t0, time.process_time() - cpu0
    assert waited * 1e3 >= cp.cuda.get_elapsed_time(end, end) + 5
    assert cpu < 0.5 * waited + 0.005      # slept, did not spin


@pytest.mark.timeout(60)
def test_a_failure_in_a_workers_bookkeeping_surfaces_at_the_next_wait(
        monkeypatch):
    real = time.perf_counter

    def broken():
        if threading.current_thread().name.startswith("cpudevice-"):
            raise RuntimeError("clock broke")
        return real()
    s = cp.cuda.Stream(non_blocking=True)
    s.synchronize()
    monkeypatch.setattr(time, "perf_counter", broken)
    s.launch_host_func(lambda _: None, None)     # the worker reads the clock
    event = s.record()
    with pytest.raises(hardware.WorkerError, match="clock broke"):
        event.synchronize()
    monkeypatch.setattr(time, "perf_counter", real)
    with pytest.raises(hardware.WorkerError):
        s.synchronize()                         # and at every later wait
    del s, event                    # the broken stream goes away
    gc.collect()


@pytest.mark.timeout(60)
def test_a_failed_worker_frees_only_what_its_dropped_work_held(monkeypatch):
    """The work a broken worker drops gives back only the engines it held
    (a real-time operation's): an ordinary kernel dropped with it leaves
    the compute engine's hold count alone, so a later real-time kernel
    still holds the engine against other streams' kernels."""
    real = time.perf_counter

    def broken():
        if threading.current_thread().name.startswith("cpudevice-"):
            raise RuntimeError("clock broke")
        return real()
    s, other, third = (cp.cuda.Stream(non_blocking=True) for _ in range(3))
    x = cp.zeros(4)
    cp.cuda.Device().synchronize()
    gate = Gate().hold_stream(s)
    with s:
        x + 1                       # an ordinary kernel, dropped below
    monkeypatch.setattr(time, "perf_counter", broken)
    gate.open()                     # the worker fails after the gate
    with pytest.raises(hardware.WorkerError, match="clock broke"):
        s.synchronize()
    monkeypatch.setattr(time, "perf_counter", real)
    engine = Gate().hold_engine(other)
    try:
        with third:
            x + 2
        behind = third.record()
        assert not wait_until(lambda: behind.done, timeout=0.5)
    finally:
        engine.open()
    behind.synchronize()
    other.synchronize()
    del s, gate
    gc.collect()


REAL_TIME_AFTER = """
import os
from modelkit import Gate, wait_until
from src import cp


def runs(same_stream):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.zeros(4, cp.float32)
    s.synchronize()
    stream_gate = Gate().hold_stream(s)
    with s:
        x += 1                  # booked by the worker, after the gate
    behind = s if same_stream else cp.cuda.Stream(non_blocking=True)
    if not same_stream:
        behind.wait_event(s.record())
    engine_gate = Gate().hold_engine(behind)
    end = behind.record()
    engine_gate.open()
    stream_gate.open()
    return (wait_until(lambda: end.done, timeout=10)
            and x.get().tolist() == [1.0] * 4)


print(runs(True), runs(False), flush=True)
os._exit(0)                     # a stuck worker is not joined
"""


def test_a_kernel_never_waits_for_a_real_time_kernel_issued_after_it():
    """A real-time kernel holds the compute engine from its issue against
    the kernels issued after it, not those issued before: a kernel left
    unbooked behind a host function, then a real-time kernel queued behind
    it (on its stream, or on one that waits for it), both run. (Waiting
    for the later one, which waits for it, never ended: in a process of
    its own, so that such a hang fails this test alone.)"""
    out = subproc.run_code(REAL_TIME_AFTER, backend="cpu", timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr


@pytest.mark.timeout(60)
def test_an_engine_is_locked_while_real_time_work_holds_it():
    """`compute_engine_busy`, which the tests of ordering wait on, reads
    the engine: free when nothing holds it, locked by a real-time kernel
    issued behind a held stream (it holds the engine before it runs), free
    again once that kernel has run."""
    assert not hardware.Engine("spare").locked()
    s = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    assert not compute_engine_busy()
    stream_gate = Gate().hold_stream(s)
    engine_gate = Gate().hold_engine(s)         # issued, not yet running
    try:
        assert compute_engine_busy()
    finally:
        stream_gate.open()
        engine_gate.open()
    s.synchronize()
    assert not compute_engine_busy()


LOST_REAL_TIME = """
import os
import threading
import time
from modelkit import Gate, wait_until
from src import cp

real = time.perf_counter


def broken():
    if threading.current_thread().name.startswith("cpudevice-"):
        raise RuntimeError("clock broke")
    return real()


s, other = (cp.cuda.Stream(non_blocking=True) for _ in range(2))
x = cp.zeros(4, cp.float32)
cp.cuda.Device().synchronize()
time.perf_counter = broken
s.launch_host_func(lambda _: None, None)    # the worker reads the clock
try:
    s.synchronize()
    failed = None
except Exception as e:
    failed = type(e).__name__
time.perf_counter = real
Gate().hold_engine(s).open()        # a real-time kernel, lost at once
with other:
    y = x + 1
end = other.record()
print(failed, wait_until(lambda: end.done, timeout=10)
      and y.get().tolist() == [1.0] * 4, flush=True)
os._exit(0)                     # a stuck worker is not joined
"""


def test_a_real_time_kernel_lost_on_a_failed_stream_holds_no_engine():
    """Work queued on a stream whose worker failed is lost at once (the
    next wait says so): a real-time kernel among it gives its engine back
    there, so other streams' kernels still run. (It kept the engine held
    for ever: in a process of its own, so that such a hang fails this
    test alone.)"""
    out = subproc.run_code(LOST_REAL_TIME, backend="cpu", timeout=60)
    assert out.stdout.split() == ["WorkerError", "True"], out.stderr


def test_an_operand_used_twice_is_read_once(profile):
    # x + x reads x once and writes the result: 2 * nbytes, what the
    # profile's memory bandwidth was calibrated on (x + x on the H100).
    profile()
    s = cp.cuda.Stream(non_blocking=True)
    x = empty(1 << 20)
    y = empty(1 << 20)
    with s:
        x + y                                   # loaded, warm
        twice = event_ms(s, lambda: x + x)
        two = event_ms(s, lambda: x + y)
    lat, work = hardware.profile.kernel_cost(2 * x.nbytes)
    lat3, work3 = hardware.profile.kernel_cost(3 * x.nbytes)
    eps = 1e-6                      # the clock's float rounding (1 ns)
    assert (lat + work) * 1e3 - eps <= twice < (lat3 + work3) * 1e3
    assert two >= (lat3 + work3) * 1e3 - eps


def test_the_first_launch_of_a_kernel_on_a_device_loads_its_module():
    # CuPy loads a kernel's module at its first launch on a device: the
    # host waits for it (module_load_ms of the profile), once per kernel
    k = cp.ElementwiseKernel("T x", "T y", "y = x + 1",
                             "test_first_launch_loads_module")
    x = empty(64)
    s = arena()
    load_ms = hardware.profile.module_load_s * 1e3
    assert load_ms == hardware.profile.data["host"]["module_load_ms"]
    with s:
        x + 1                                   # an unnamed kernel, warm
        first = event_ms(s, lambda: k(x), repeat=1)
        again = event_ms(s, lambda: k(x))
        plain = event_ms(s, lambda: x + 1)
    eps = 1e-6                      # the clock's float rounding (1 ns)
    assert load_ms - eps <= first < load_ms + 100, (first, load_ms)
    assert again < load_ms and plain < load_ms, (again, plain, load_ms)


def test_an_elementwise_ufunc_with_two_outputs_writes_both(profile):
    # NumPy's modf on a device array (__array_ufunc__, as in CuPy) reads x
    # and writes two arrays: 3 * nbytes, like x + y
    profile()
    s = arena()
    x = empty(1 << 20)
    with s:
        x + x                                   # loaded, warm
        two = event_ms(s, lambda: np.modf(x))
    lat3, work3 = hardware.profile.kernel_cost(3 * x.nbytes)
    lat4, work4 = hardware.profile.kernel_cost(4 * x.nbytes)
    eps = 1e-6
    assert (lat3 + work3) * 1e3 - eps <= two < (lat4 + work4) * 1e3, two
    frac, whole = np.modf(cp.asarray([1.5, -2.25]))
    assert isinstance(frac, cp.ndarray) and isinstance(whole, cp.ndarray)
    assert frac.get().tolist() == [0.5, -0.25]
    assert whole.get().tolist() == [1.0, -2.0]
