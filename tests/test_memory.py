"""The peak-memory monitor, the summary table and the timeline plot.

`MemoryMonitor` reads the pool in CuPy's memory-hook callbacks; these tests
run it against the backend's pool (the CPU device model here, CuPy on a
GPU) and check every number against what the pool itself reports.
"""
import mmap
import threading
import time

import matplotlib
import psutil
import pytest

from src import cp
from src.memory import (MemoryMonitor, Sample, host_rss, memory_summary,
                        plot_timeline)
from src.timing import EventTimer

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

pool = cp.get_default_memory_pool()
KB4 = 4096                      # 1,000 float32 values, rounded to 512 bytes
MB4 = 4_000_256                 # 10**6 float32 values, rounded


@pytest.fixture(autouse=True)
def empty_pool():
    """Each test starts with no idle blocks, so new blocks come from the
    device; live arrays of other tests may still be allocated."""
    pool.free_all_blocks()
    yield
    pool.set_limit(size=0)
    pool.free_all_blocks()


def floats(n):
    return cp.empty(n, dtype=cp.float32)


def test_peak_allocated_remembers_what_frees_forget():
    with MemoryMonitor() as mon:
        a = floats(1000)
        b = floats(10**6)
        del b
    assert mon.peak_allocated - mon.start_allocated == KB4 + MB4
    assert pool.used_bytes() - mon.start_allocated == KB4
    del a


def test_peak_reserved_grows_only_when_the_pool_takes_new_memory():
    before = pool.total_bytes()
    with MemoryMonitor() as mon:
        a = floats(10**6)
        del a
        a = floats(10**6)           # the idle block again
        b = floats(1000)            # a piece of nothing: a new block
    assert mon.peak_reserved == before + MB4 + KB4
    assert mon.peak_allocated - mon.start_allocated == MB4 + KB4
    del a, b


def test_reset_makes_the_present_the_new_start():
    with MemoryMonitor() as mon:
        a = floats(10**6)
        del a
        b = floats(1000)
        mon.reset()
        assert mon.peak_allocated == mon.start_allocated == pool.used_bytes()
        assert mon.peak_reserved == pool.total_bytes()
        assert [s.event for s in mon.samples] == ["reset"]
        c = floats(1000)
    assert mon.peak_allocated - mon.start_allocated == KB4
    del b, c


def test_timeline_has_the_pools_state_after_each_malloc_and_free():
    seen = []
    t0 = time.perf_counter()
    with MemoryMonitor() as mon:
        a = floats(1000)
        seen.append((pool.used_bytes(), pool.total_bytes()))
        b = floats(10**6)
        seen.append((pool.used_bytes(), pool.total_bytes()))
        del a
        seen.append((pool.used_bytes(), pool.total_bytes()))
    del b
    elapsed = time.perf_counter() - t0
    samples = mon.samples
    assert all(isinstance(s, Sample) for s in samples)
    assert [s.event for s in samples] == ["reset", "malloc", "malloc", "free"]
    assert [s.size for s in samples] == [0, KB4, MB4, KB4]
    assert [(s.allocated, s.reserved) for s in samples[1:]] == seen
    times = [s.time for s in samples]
    assert times == sorted(times) and times[0] >= 0
    assert times[-1] <= elapsed         # seconds since the monitor started
    assert all(s.rss is None for s in samples)


def test_a_failed_allocation_is_recorded_as_failed():
    pool.set_limit(size=pool.total_bytes() + MB4)
    with MemoryMonitor() as mon:
        with pytest.raises(cp.cuda.memory.OutOfMemoryError):
            floats(2 * 10**6)
    last = mon.samples[-1]
    assert (last.event, last.size) == ("failed", 8_000_000)
    assert mon.peak_allocated == mon.start_allocated


def test_without_timeline_only_the_peaks_are_kept():
    with MemoryMonitor(timeline=False) as mon:
        a = floats(10**6)
        del a
    assert mon.samples == []
    assert mon.peak_allocated - mon.start_allocated == MB4


def test_rss_is_recorded_with_each_event_when_asked():
    with MemoryMonitor(rss=True) as mon:
        a = floats(1000)
        del a
    assert [s.event for s in mon.samples] == ["reset", "malloc", "free"]
    assert all(s.rss > 0 for s in mon.samples)


def test_monitors_nest_and_each_keeps_its_own_peak():
    with MemoryMonitor() as outer:
        a = floats(10**6)
        del a
        with MemoryMonitor() as inner:
            b = floats(1000)
    assert inner.peak_allocated - inner.start_allocated == KB4
    assert outer.peak_allocated - outer.start_allocated == MB4
    assert len(outer.samples) == 4 and len(inner.samples) == 2
    del b


def test_allocations_of_other_threads_are_not_seen_as_in_cupy():
    # CuPy's hooks are thread-local; the peak still covers the present.
    held = []
    with MemoryMonitor() as mon:
        t = threading.Thread(target=lambda: held.append(floats(10**6)))
        t.start()
        t.join()
    assert [s.event for s in mon.samples] == ["reset"]
    assert mon.peak_allocated >= pool.used_bytes()
    held.clear()


@pytest.mark.skipif(cp.cuda.runtime.getDeviceCount() < 2,
                    reason="needs a second device")
def test_another_devices_events_are_ignored_and_its_own_pool_is_read():
    with MemoryMonitor() as mon:             # watches device 0
        on_device0 = (pool.used_bytes(), pool.total_bytes())
        with cp.cuda.Device(1):
            a1 = floats(10**6)               # not on the watched device
            assert mon.current() == on_device0
            del a1
        a0 = floats(1000)
    assert mon.device == 0
    assert [s.event for s in mon.samples] == ["reset", "malloc"]
    assert mon.peak_allocated - mon.start_allocated == KB4
    del a0


def test_summary_has_the_five_rows_with_idle_the_difference():
    pool.free_all_blocks()
    with MemoryMonitor() as mon:
        a = floats(1000)
        b = floats(10**6)
        del b
        c = floats(250_000)
    rows = {}
    for line in memory_summary(mon).splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 3 and cells[1] != "Bytes":
            rows[cells[0]] = int(cells[1].replace(",", ""))
    assert list(rows) == ["Reserved", "Allocated", "Idle", "Max reserved",
                          "Max allocated"]
    assert rows["Reserved"] == pool.total_bytes()
    assert rows["Allocated"] == pool.used_bytes()
    assert rows["Idle"] == rows["Reserved"] - rows["Allocated"]
    assert rows["Max allocated"] - rows["Allocated"] == MB4 - 1_000_448
    assert rows["Max reserved"] == rows["Reserved"]
    assert "device 0" in memory_summary(mon)
    del a, c


def test_timeline_plot_draws_allocated_reserved_and_rss_steps():
    with MemoryMonitor(rss=True) as mon:
        a = floats(10**6)
        del a
    fig, ax = plt.subplots()
    assert plot_timeline(mon, ax, "run") is ax
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["run: allocated", "run: reserved", "run: host RSS"]
    allocated = ax.get_lines()[0].get_ydata()
    assert allocated[1] - allocated[0] == pytest.approx(MB4 / 2**20)
    assert "event" in ax.get_xlabel() and "MiB" in ax.get_ylabel()
    plt.close(fig)


def test_timeline_plot_draws_host_rss_in_mib():
    """The dotted line is the host's RSS in MiB, as the axis says: each
    point its sample's RSS over 2**20, near what psutil reads now."""
    with MemoryMonitor(rss=True) as mon:
        a = floats(10**6)
        del a
    fig, ax = plt.subplots()
    plot_timeline(mon, ax)
    line = ax.get_lines()[2]
    assert line.get_label() == "host RSS" and line.get_linestyle() == ":"
    ys = list(line.get_ydata())
    assert ys == pytest.approx([s.rss / 2**20 for s in mon.samples])
    now = psutil.Process().memory_info().rss / 2**20
    assert all(now / 2 < y < now * 2 for y in ys), (ys, now)
    plt.close(fig)


def test_timeline_plot_against_time_uses_the_sample_times():
    with MemoryMonitor() as mon:
        a = floats(1000)
        del a
    fig, ax = plt.subplots()
    plot_timeline(mon, ax, x="time")
    xs = ax.get_lines()[0].get_xdata()
    assert list(xs) == [s.time * 1e3 for s in mon.samples]
    assert len(ax.get_lines()) == 2 and "ms" in ax.get_xlabel()
    plt.close(fig)


def test_sample_times_read_the_books_host_clock():
    x = cp.ones((1024, 1024), dtype=cp.float32)
    (x @ x).sum()
    cp.cuda.Device().synchronize()
    with MemoryMonitor() as mon:
        a = floats(1000)
        with EventTimer() as t:
            for _ in range(8):
                y = x @ x
        del y
        t.end.synchronize()
        b = floats(1000)
    del a, b
    # the two mallocs bracket a wait for the products: the host clock
    # reads about their device time, on the model as on a GPU (where the
    # real time of their NumPy, about 0.3 s on 2 cores, would be far
    # longer). The slack is the host's own Python between the calls,
    # which runs in real time: a few milliseconds when a loaded 2-core
    # machine preempts it (a CI run read 2.1 ms against 0.37 of device
    # time), still a hundredth of what a real clock would read.
    gap = mon.samples[-1].time - mon.samples[1].time
    assert t.seconds * 0.9 < gap < t.seconds * 1.5 + 0.01, (gap, t.seconds)


def test_host_rss_counts_touched_host_memory():
    # Fresh pages from the OS: memory that earlier tests freed and the C
    # library kept (already resident) could serve a NumPy allocation.
    with mmap.mmap(-1, 2**24) as h:
        before = host_rss()
        h.write(b"\1" * 2**24)                # 16 MiB, written
        assert host_rss() - before >= 2**23


def test_the_fused_energys_extra_memory_is_its_partials_result_and_cubs():
    """Chapter 2's fused peak: stage 1's partial sums (8 bytes a row, in
    512-byte blocks), the 0-d result, and, when CuPy sends stage 2's sum to
    CUB (``CUPY_ACCELERATORS`` unset or naming ``cub``), CUB's workspace:
    1 byte for so few partials, one more 512-byte block. The model takes
    it where CuPy does."""
    import os
    from src.energy import harmonic_energy
    x = cp.ones(1 << 20, dtype=cp.float32)
    rows = harmonic_energy.rows(x)
    assert 2 <= rows <= 2048                # one tile of CUB's reduce
    cub = "cub" in os.environ.get("CUPY_ACCELERATORS", "cub").split(",")
    with MemoryMonitor() as mon:
        e = harmonic_energy(x, 1.0, 0.0)
    assert float(e) == x.size / 2
    partials = -(-8 * rows // 512) * 512
    assert mon.peak_allocated - mon.start_allocated == \
        partials + 512 + (512 if cub else 0)
