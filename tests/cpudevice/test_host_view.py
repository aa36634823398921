"""Each host thread's view of the device clock (`cpudevice/_clock.py`).

Work is issued at the thread's view, which a call into the model's API
moves on by CuPy's issue time (the profile's ``issue_us``) and a host wait
by the modelled wait: the model's own Python, slower than CuPy's, and its
real work, slower than the device it models, stay off the device clock.
"""
import threading
import time

import numpy as np
import pytest

from src import BACKEND, cp, cpx

pytestmark = pytest.mark.skipif(BACKEND != "cpu",
                                reason="checks the CPU device model")
if BACKEND == "cpu":
    from modelkit import hardware


def best_ms(stream, issue, repeat=3):
    """The fastest of ``repeat`` event-timed runs of ``issue()`` on
    ``stream``, in ms, with the host's wall time for the same run."""
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        start = stream.record()
        t0 = time.perf_counter()
        issue()
        wall = time.perf_counter() - t0
        end = stream.record()
        assert end.synchronize() is None
        best = min(best, (cp.cuda.get_elapsed_time(start, end), wall * 1e3))
    return best


@pytest.mark.timeout(60)
def test_small_launches_cost_the_device_cupys_issue_time_not_the_models():
    s = cp.cuda.Stream(non_blocking=True)
    with s:                         # not ordered with the null stream
        x = cp.zeros(8, cp.float32)
    n = 50

    def issue():
        with s:
            for _ in range(n):
                x.__iadd__(1)
    issue()                                         # loaded, warm
    s.synchronize()
    device_ms, wall_ms = best_ms(s, issue)
    prof = hardware.profile
    per_call = max(prof.issue_s("launch"), sum(prof.kernel_cost(64)))
    expected_ms = n * per_call * 1e3
    # an idle device runs each tiny kernel as soon as the host issues it, so
    # the events time the issue: CuPy's (10 us a launch on the H100's host),
    # not the model's real Python
    assert 0.9 * expected_ms <= device_ms <= 3 * expected_ms, \
        (device_ms, expected_ms, wall_ms)
    np.testing.assert_array_equal(x.get(), np.full(8, 4 * n, np.float32))  # warm-up + 3


@pytest.mark.timeout(60)
def test_events_around_a_pageable_copy_read_its_modelled_staging_and_copy():
    s = cp.cuda.Stream(non_blocking=True)
    n = 8 << 20                                     # 32 MiB of float32
    host = np.ones(n, np.float32)                   # pageable
    dev = cp.empty(n, cp.float32)
    dev.set(host, stream=s)                         # warm the staging
    device_ms, wall_ms = best_ms(s, lambda: dev.set(host, stream=s))
    prof = hardware.profile
    modelled = (prof.stage_cost(host.nbytes) +
                sum(prof.copy_cost(host.nbytes, "H2D")) +
                prof.issue_s("copy")) * 1e3
    # the set returns when the copy is done, after the real memcpy, whatever
    # it took; the end event is issued in the thread's view: at the copy's
    # modelled end
    assert modelled * 0.95 <= device_ms <= modelled * 1.5, \
        (device_ms, modelled, wall_ms)
    assert wall_ms >= 0.95 * (modelled - prof.issue_s("copy") * 1e3)
    assert float(dev[-1]) == 1.0


@pytest.mark.timeout(60)
def test_a_host_wait_for_slow_real_work_moves_the_view_to_its_modelled_end():
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.ones(8 << 20, cp.float32)            # 32 MiB
        cp.sin(x)                                   # loaded
    s.synchronize()

    def sin_and_wait():
        with s:
            y = cp.sin(x)                           # ~20+ ms of real NumPy
        s.synchronize()
        return y
    device_ms, wall_ms = best_ms(s, sin_and_wait)
    work = sum(hardware.profile.kernel_cost(2 * x.nbytes)) * 1e3
    # modelled: 64 MiB at the H100's memory bandwidth, about 0.04 ms; the
    # host really waited for the CPU's sine, and the events do not see it
    assert device_ms < work + 0.2 < 0.25 * wall_ms, (device_ms, work, wall_ms)
    assert wall_ms > 4 * device_ms


@pytest.mark.timeout(60)
def test_each_host_thread_has_its_own_view():
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(8 << 20, cp.float32)
    lags = {}

    def other():
        lags["other before"] = hardware.host_lag()
        y = x.copy()
        float(y[0])
        lags["other after"] = hardware.host_lag()
    with s:
        cp.sin(x)
    s.synchronize()                                 # the lag grows here
    lags["main"] = hardware.host_lag()
    t = threading.Thread(target=other)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    assert lags["main"] > 0 and lags["other before"] == 0.0
    assert hardware.host_lag() == lags["main"]
    # a view only runs behind the clock (a thread has no view ahead of it)
    assert hardware.host_now() <= hardware.clock()


@pytest.mark.timeout(60)
def test_a_thread_far_behind_does_not_wait_its_lag_on_anothers_work():
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.ones(8 << 20, cp.float32)
        for _ in range(5):
            cp.sin(x)
    s.synchronize()                 # real sines, far slower than modelled
    lag = hardware.host_lag()
    other = cp.cuda.Stream(non_blocking=True)
    done = {}

    def issue():                    # a thread with no lag of its own
        with other:
            done["y"] = cp.zeros(8, cp.float32) + 1
    t = threading.Thread(target=issue)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()
    t0 = time.perf_counter()
    other.synchronize()             # its work ends in *its* view
    waited = time.perf_counter() - t0
    assert lag > 0.02, lag
    assert waited < lag / 2, (waited, lag)
    assert float(done["y"][0]) == 1.0


@pytest.mark.timeout(60)
def test_a_reduction_costs_the_device_clock_its_own_issue_time():
    """A reduction's launch (``x.sum()``, a ReductionKernel) is issued at the
    profile's ``issue_us["reduction"]``, apart from an elementwise launch:
    with a reduction made 2 ms to issue, five sums on an idle stream take
    about 10 ms of events, five additions no more than before."""
    import copy
    old = hardware.profile
    data = copy.deepcopy(old.data)
    data["host"]["issue_us"]["reduction"] = 2000.0
    hardware.set_profile(type(old)(data))
    try:
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            x = cp.ones(8, cp.float32)
        k = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0",
                               "test_issue_sum")

        def sums():
            with s:
                for _ in range(5):
                    x.sum()
                    k(x)
        sums()                                      # loaded, warm
        s.synchronize()
        sums_ms, wall_ms = best_ms(s, sums)
        assert 10 * 2.0 <= sums_ms <= 10 * 2.0 * 1.5, (sums_ms, wall_ms)

        def adds():
            with s:
                for _ in range(10):
                    x + x
        adds_ms, _ = best_ms(s, adds)
        assert adds_ms < 2.0, adds_ms
    finally:
        hardware.set_profile(old)
