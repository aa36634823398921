"""Peak device memory and a memory timeline, built on CuPy's memory hooks.

CuPy's pool says how much it holds now (``used_bytes``, ``total_bytes``) but
keeps no peak. `MemoryMonitor` is a ``cp.cuda.MemoryHook``: CuPy calls it
after every allocation from the pool and every return of a block to it, and
it reads the pool right there, so its peaks and its timeline are exact.

What CuPy's hooks cover, and so what the monitor sees: the allocations and
frees made by the thread that entered ``with monitor:`` (hooks are
thread-local), through the default ``MemoryPool`` (not the stream-ordered
``MemoryAsyncPool``, which calls no hooks). ``free_all_blocks`` calls no hook
either: reserved memory it gives back shows at the monitor's next event.
"""
import itertools
from typing import NamedTuple, Optional

import psutil

from . import cp
from .timing import MODELLED, host_clock

_process = psutil.Process()


def host_rss():
    """Resident set size of this process in bytes: host RAM it occupies."""
    return _process.memory_info().rss


class Sample(NamedTuple):
    """The pool right after one event (``rss`` is None unless recorded)."""
    time: float          # seconds since the monitor was created or reset,
                         # by the book's host clock (modelled on the model)
    event: str           # 'reset', 'malloc', 'free', or 'failed' (a malloc)
    size: int            # bytes of the block, rounded as the pool rounds
    allocated: int       # pool.used_bytes(): blocks held by arrays
    reserved: int        # pool.total_bytes(): taken from the device
    rss: Optional[int]   # host_rss(), when the monitor records it


class MemoryMonitor(cp.cuda.MemoryHook):
    """Peak allocated and reserved bytes of one device's pool, and a timeline.

    Use as ``with MemoryMonitor() as mon:``; ``mon.peak_allocated -
    mon.start_allocated`` is the most memory the block needed beyond what
    was already allocated. It watches the default pool of the device that is
    current when it is made. ``rss=True`` also records the host's RSS at
    each event; ``timeline=False`` keeps the peaks only (for long runs,
    where a sample per event would grow without bound).
    """

    _ids = itertools.count()

    def __init__(self, rss=False, timeline=True):
        # CuPy keys the registered hooks by name: one name per monitor
        self.name = f"MemoryMonitor-{next(self._ids)}"
        self.pool = cp.get_default_memory_pool()
        self.device = cp.cuda.runtime.getDevice()
        self.rss = rss
        self.timeline = timeline
        self.reset()

    def reset(self):
        """Start over: the peaks become the pool's present state."""
        self._start = host_clock()
        self._peak_allocated, self._peak_reserved = self.current()
        self.start_allocated = self._peak_allocated
        self.samples = []
        self._record("reset", 0)

    def current(self):
        """``(allocated, reserved)`` bytes of the monitored device's pool."""
        if cp.cuda.runtime.getDevice() == self.device:
            return self.pool.used_bytes(), self.pool.total_bytes()
        with cp.cuda.Device(self.device):
            return self.pool.used_bytes(), self.pool.total_bytes()

    @property
    def peak_allocated(self):
        """Most bytes held by arrays at once since the last reset."""
        return max(self._peak_allocated, self.current()[0])

    @property
    def peak_reserved(self):
        """Most bytes the pool held on the device at once since the reset."""
        return max(self._peak_reserved, self.current()[1])

    def _record(self, event, size):
        allocated, reserved = self.current()
        self._peak_allocated = max(self._peak_allocated, allocated)
        self._peak_reserved = max(self._peak_reserved, reserved)
        if self.timeline:
            self.samples.append(Sample(
                host_clock() - self._start, event, size, allocated,
                reserved, host_rss() if self.rss else None))

    # CuPy calls these with keyword arguments, after the pool has acted.
    def malloc_postprocess(self, **kwargs):
        if kwargs["device_id"] == self.device:
            failed = kwargs["mem_ptr"] == 0 and kwargs["mem_size"] > 0
            self._record("failed" if failed else "malloc", kwargs["mem_size"])

    def free_postprocess(self, **kwargs):
        if kwargs["device_id"] == self.device:
            self._record("free", kwargs["mem_size"])


_MIB = 2**20


def memory_summary(monitor):
    """The pool now and at its peaks, as a table like PyTorch's and
    MindSpore's ``memory_summary``: Idle is reserved but not allocated."""
    allocated, reserved = monitor.current()
    rows = [("Reserved", reserved), ("Allocated", allocated),
            ("Idle", reserved - allocated),
            ("Max reserved", monitor.peak_reserved),
            ("Max allocated", monitor.peak_allocated)]
    width = 47
    title = f"Memory summary (CuPy pool, device {monitor.device})"
    lines = ["|" + "=" * width + "|",
             f"| {title:<{width - 2}} |",
             "|" + "-" * width + "|",
             f"| {'Metric':<15}| {'Bytes':>14} | {'MiB':>11} |",
             "|" + "-" * width + "|"]
    lines += [f"| {name:<15}| {value:>14,} | {value / _MIB:>11.2f} |"
              for name, value in rows]
    lines.append("|" + "=" * width + "|")
    return "\n".join(lines)


def plot_timeline(monitor, ax, label="", x="event"):
    """Step plot of allocated (solid) and reserved (dashed) MiB, and host RSS
    (dotted) when recorded, against event number or time in ms."""
    samples = monitor.samples
    if x == "event":
        xs = range(len(samples))
        ax.set_xlabel("pool event (allocation or free) number")
    else:
        xs = [s.time * 1e3 for s in samples]
        ax.set_xlabel(f"time since the monitor started (ms){MODELLED}")
    prefix = f"{label}: " if label else ""
    line, = ax.step(xs, [s.allocated / _MIB for s in samples], where="post",
                    marker="o", markersize=3, label=f"{prefix}allocated")
    ax.step(xs, [s.reserved / _MIB for s in samples], where="post",
            linestyle="--", color=line.get_color(),
            label=f"{prefix}reserved")
    if monitor.rss:
        ax.step(xs, [s.rss / _MIB for s in samples], where="post",
                linestyle=":", color=line.get_color(),
                label=f"{prefix}host RSS")
    ax.set_ylabel("memory (MiB)")
    return ax
