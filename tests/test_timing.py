"""src.timing: what each timer waits for, tested with gates that hold a
stream (not with timings), and the lower bounds a gate makes certain; the
book's host clock, and the one timeline it shares with events on the
model."""
import threading
import time

import numpy
import pytest

import src
from modelkit import Gate
from src import cp, cpx
from src.backend import choose_host_clock
from src.timing import MODELLED, Benchmark, EventTimer, host_clock

GATE_S = 0.2     # how long a gate stays closed in the tests that open it late

needs_model = pytest.mark.skipif(
    src.BACKEND != "cpu", reason="gates hold streams of the CPU device model")


def gated_stream():
    """A new stream held by a closed gate, and the gate."""
    s = cp.cuda.Stream()
    return s, Gate().hold_stream(s)


def open_later(gate, seconds=GATE_S):
    timer = threading.Timer(seconds, gate.open)
    timer.start()
    return timer


def test_benchmark_times_the_host_block_and_keeps_seconds():
    with Benchmark() as b:
        time.sleep(0.05)
    assert b.seconds >= 0.05 and b.real_seconds >= 0.05


def test_benchmark_prints_description_in_milliseconds(capsys):
    with Benchmark("sleep"):
        time.sleep(0.01)
    out = capsys.readouterr().out
    assert out.startswith("sleep: ") and out.endswith(f" ms{MODELLED}\n")


def test_benchmark_is_silent_without_description(capsys):
    with Benchmark():
        pass
    assert capsys.readouterr().out == ""


@needs_model
def test_benchmark_without_sync_does_not_wait_for_queued_work():
    s, gate = gated_stream()
    with s:
        x = cp.ones(1000)
        with Benchmark() as b:
            y = x + 1
        after = s.record()
    assert b.seconds is not None and not after.done
    gate.open()
    assert float(y.sum()) == 2000.0


@needs_model
def test_benchmark_with_sync_waits_for_the_blocks_work():
    with Benchmark(sync=True) as b:
        s, gate = gated_stream()
        with s:
            y = cp.ones(1000) + 1
        after = s.record()
        timer = open_later(gate)
    timer.join()
    # the gate held the stream for GATE_S of real time, and an item whose
    # length is real lasts as long on the model's timeline: both clocks
    assert after.done and b.real_seconds >= GATE_S and b.seconds >= GATE_S
    assert float(y.sum()) == 2000.0


@needs_model
def test_benchmark_with_sync_waits_for_earlier_work_before_starting():
    s, gate = gated_stream()
    before = s.record()
    timer = open_later(gate)
    with Benchmark(sync=True):
        assert before.done
    timer.join()


@needs_model
def test_benchmark_leaves_an_exception_alone(capsys):
    gate = Gate()
    try:
        with pytest.raises(ZeroDivisionError):
            with Benchmark("never printed", sync=True) as b:
                s = cp.cuda.Stream()
                gate.hold_stream(s)
                1 / 0
        assert b.seconds is not None and not s.done   # it did not wait
        assert capsys.readouterr().out == ""
    finally:
        gate.open()


@needs_model
def test_event_timer_does_not_wait_until_seconds_is_read():
    s, gate = cp.cuda.Stream(), Gate()
    with EventTimer(s) as t:
        gate.hold_stream(s)               # the device idles until it opens
        with s:
            cp.ones(1000) + 1
    assert not t.end.done                     # exiting the block queued only
    open_later(gate)
    assert t.seconds >= GATE_S                # waits, then device time
    assert t.end.done


def test_event_timer_records_on_the_current_stream_by_default():
    s = cp.cuda.Stream()
    with s:
        with EventTimer() as t:
            cp.ones(1000) + 1
    assert t.stream == s
    assert t.seconds >= 0.0


def test_event_timer_measures_device_work_in_seconds():
    x = cp.ones(2**20)
    with EventTimer() as t:
        for _ in range(10):
            x = x + 1
    assert 0.0 < t.seconds < 60.0
    assert float(x[0]) == 11.0


# -- the book's host clock ----------------------------------------------------

def test_host_clock_is_perf_counter_on_a_gpu_and_a_view_on_the_model():
    assert choose_host_clock("gpu") is time.perf_counter
    view = choose_host_clock("cpu")
    assert view is not time.perf_counter
    before = time.perf_counter()
    assert view() <= time.perf_counter()    # the view never runs ahead
    assert view() >= before - 3600          # ... nor far behind
    with pytest.raises(ValueError, match="not 'gpu' or 'cpu'"):
        choose_host_clock("tpu")


def test_host_clock_passes_at_real_speed_in_the_readers_own_python():
    t0, r0 = host_clock(), time.perf_counter()
    time.sleep(0.05)
    assert host_clock() - t0 == pytest.approx(time.perf_counter() - r0,
                                              abs=0.01)


def test_modelled_is_said_on_the_model_only():
    assert MODELLED == ("" if src.BACKEND == "gpu" else " (modelled)")


def long_device_work(n=8, spin_ms=5):
    """Products, then a kernel that spins for ``spin_ms`` on the device
    (no real work on the model): device work far longer than queueing it,
    even when a loaded machine makes the host's Python late."""
    x = cp.ones((1024, 1024), dtype=cp.float32)
    for _ in range(n):
        y = x @ x
    from src.kernels import stamp
    stamp(cp.zeros(2, dtype=cp.uint64), spin_ns=int(spin_ms * 1e6))
    return y


def test_benchmark_with_sync_agrees_with_events_on_long_device_work():
    long_device_work(1)
    with Benchmark(sync=True) as b:
        with EventTimer() as t:
            long_device_work()
    # on a GPU both clocks time the same work; on the model the host clock
    # is the thread's view, which waits for the work's modelled end
    assert 1 / 1.5 < b.seconds / t.seconds < 1.5, (b.seconds, t.seconds)
    assert b.real_seconds >= b.seconds
    if src.BACKEND == "cpu":       # the real NumPy took longer than modelled
        assert b.real_seconds > b.seconds


def test_benchmark_sees_a_copy_and_a_kernel_on_two_streams_overlap():
    """The copy (64 MiB, about 1.2 ms on the model's H100 link) runs beside
    the kernels (about 5.5 ms): the overlap saves the copy's time, a margin
    wide enough for a loaded machine's late host (a CI run read 5.97 ms
    against 0.32 + 5.53 ms with a 16 MiB copy)."""
    host = cpx.empty_pinned(16 << 20, numpy.float32)
    host[...] = 1.0
    dev = cp.empty(16 << 20, cp.float32)
    copies = cp.cuda.Stream(non_blocking=True)
    kernels = cp.cuda.Stream(non_blocking=True)
    with kernels:
        long_device_work(1)
    with Benchmark(sync=True) as b:
        with EventTimer(copies) as copy:
            dev.set(host, stream=copies)
        with kernels, EventTimer(kernels) as kernel:
            long_device_work(6)
    assert b.seconds < copy.seconds + kernel.seconds, \
        (b.seconds, copy.seconds, kernel.seconds)
    assert b.real_seconds >= b.seconds
    if src.BACKEND == "cpu":
        assert b.real_seconds > b.seconds
    assert float(dev[-1]) == 1.0


@needs_model
def test_profiler_cpu_times_are_the_view_and_its_result_says_modelled():
    x = cp.ones((1024, 1024), dtype=cp.float32)

    def product_and_wait():
        float((x @ x)[0, 0])
    r = cpx.profiler.benchmark(product_and_wait, n_repeat=3, n_warmup=1)
    # the host waited for a product the device does in well under 10 ms;
    # the real NumPy product, on any CPU, takes longer than its modelled time
    assert (r.cpu_times < 0.01).all(), r.cpu_times
    assert (r.cpu_times < r.gpu_times[0] * 1.5).all(), r
    assert str(r).endswith(" (modelled)")


@needs_model
def test_profiler_max_duration_counts_real_time():
    x = cp.ones((1024, 1024), dtype=cp.float32)

    def product_and_wait():
        float((x @ x)[0, 0])
    real = time.perf_counter()
    r = cpx.profiler.benchmark(product_and_wait, n_repeat=10**6, n_warmup=1,
                               max_duration=0.05)
    # modelled, 0.05 s holds about a thousand products; really, far fewer
    assert r.cpu_times.size < 1000
    assert time.perf_counter() - real < 30


@needs_model
def test_profiler_times_host_work_at_its_real_pace():
    """A NumPy call's cpu_times on the model are its real time: the model's
    worker books each start event before the host's clock starts, as a GPU
    leaves the host nothing to do after a record (before, the booking ran
    beside the call and a 1,024-value NumPy call read 5 times its time)."""
    h = numpy.ones(1024, dtype=numpy.float32)
    real = []

    def host_only():
        t = time.perf_counter()
        2 * h + 1
        real.append(time.perf_counter() - t)
    r = cpx.profiler.benchmark(host_only, n_repeat=200, n_warmup=2)
    inside = numpy.median(real[2:])       # the call itself, measured inside
    assert numpy.median(r.cpu_times) < 3 * inside + 10e-6, (
        numpy.median(r.cpu_times), inside)
