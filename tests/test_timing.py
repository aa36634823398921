"""src.timing: what each timer waits for, tested with gates that hold a
stream (not with timings), and the lower bounds a gate makes certain."""
import threading
import time

import pytest

import src
from modelkit import Gate
from src import cp
from src.timing import Benchmark, EventTimer

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
    assert b.seconds >= 0.05


def test_benchmark_prints_description_in_milliseconds(capsys):
    with Benchmark("sleep"):
        time.sleep(0.01)
    out = capsys.readouterr().out
    assert out.startswith("sleep: ") and out.endswith(" ms\n")


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
    assert after.done and b.seconds >= GATE_S
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
