"""CPU device model: an event is stamped when its stream reaches it."""
import sys
import time

import pytest

from src import BACKEND, cp

pytestmark = pytest.mark.skipif(BACKEND != "cpu",
                                reason="checks the CPU device model")


def spin(seconds):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        pass


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
