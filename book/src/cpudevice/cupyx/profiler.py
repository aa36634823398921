"""``cupyx.profiler`` on the CPU device model: ``benchmark`` and ``time_range``.

``benchmark`` is CuPy's algorithm: host time around each call, device time
from events recorded before and after it. CuPy reads the host time with
``time.perf_counter``; the model reads the calling thread's view of its
device clock (`_clock.host_now`), so that ``cpu_times`` and ``gpu_times``
are on one modelled timeline, as they are on a GPU, and its printed result
says "(modelled)". ``max_duration`` is still counted in real time: it bounds
how long the call really takes.
"""
import contextlib
import math
import time

import numpy

from .. import cuda
from .._clock import api, host_now
from ..cuda import runtime
from ..cuda.device import Device
from ..cuda.stream import Event


class _PerfCaseResult:
    """Timing results of ``benchmark``; print it for a summary."""

    def __init__(self, name, ts, devices):
        self.name = name
        self._ts = ts
        self._devices = devices

    def __repr__(self):
        return self.to_str(show_gpu=True)

    @property
    def cpu_times(self):
        """Host seconds per repeat, shape ``(n_repeat,)`` (modelled: the
        calling thread's view of the device clock)."""
        return self._ts[0]

    @property
    def gpu_times(self):
        """Device seconds per repeat, shape ``(len(devices), n_repeat)``."""
        return self._ts[1:]

    @staticmethod
    def _to_str_per_item(device_name, t):
        t_us = t * 1e6
        s = "    {}: {:9.03f} us".format(device_name, t_us.mean())
        if t.size > 1:
            s += "   +/- {:6.03f} (min: {:9.03f} / max: {:9.03f}) us".format(
                t_us.std(), t_us.min(), t_us.max())
        return s

    def to_str(self, show_gpu=False):
        results = [self._to_str_per_item("CPU", self._ts[0])]
        if show_gpu:
            for i, d in enumerate(self._devices):
                results.append(self._to_str_per_item(
                    "GPU-{}".format(d), self._ts[1 + i]))
        return "{:<20s}:{} (modelled)".format(self.name, " ".join(results))

    def __str__(self):
        return self.to_str(show_gpu=True)


@api("settle")          # no issue time in any profile: not a CuPy call
def _settle(events):
    """Wait, in real time only, until each event's stream worker has
    handled its record. On a GPU recording an event leaves the host nothing
    to do; on the model a worker thread books it, in Python, and would
    take the interpreter from the host's timed call (a NumPy call timed
    right after the record would read several times its real time)."""
    for e in events:
        if e._rec is not None:
            e._rec[0].wait_done(e._rec[1].seq)     # (queue, item, capture)


def benchmark(func, args=(), kwargs={}, n_repeat=10000, *, name=None,
              n_warmup=10, max_duration=math.inf, devices=None):
    """Time ``func(*args, **kwargs)`` on the host and on the devices."""
    if name is None:
        name = func.__name__
    if devices is None:
        devices = (runtime.getDevice(),)
    if not callable(func):
        raise ValueError("`func` should be a callable object.")
    if not isinstance(args, tuple):
        raise ValueError("`args` should be of tuple type.")
    if not isinstance(kwargs, dict):
        raise ValueError("`kwargs` should be of dict type.")
    if not isinstance(n_repeat, int):
        raise ValueError("`n_repeat` should be an integer.")
    if not isinstance(devices, tuple):
        raise ValueError("`devices` should be of tuple type")

    # Recording the events on each device is one API call that costs an
    # event's record, as CuPy's `with device: event.record()` does: the
    # model's own Python for the device switch must not stretch the
    # interval the events time.
    @api("event")
    def on_each(action):
        for i, d in enumerate(devices):
            with Device(d):
                action(i)

    starts = [Event() for _ in devices]
    ends = [Event() for _ in devices]
    for _ in range(n_warmup):
        func(*args, **kwargs)
    on_each(lambda i: starts[i].record())
    for e in starts:
        e.synchronize()
    cpu, gpu = [], [[] for _ in devices]
    duration = 0.0
    for _ in range(n_repeat):
        on_each(lambda i: starts[i].record())
        _settle(starts)
        real_t1 = time.perf_counter()
        t1 = host_now()
        func(*args, **kwargs)
        t2 = host_now()
        on_each(lambda i: ends[i].record())
        for e in ends:
            e.synchronize()
        cpu.append(t2 - t1)
        for i in range(len(devices)):
            # looked up at each call, as CuPy does (cupy.cuda's name)
            gpu[i].append(cuda.get_elapsed_time(starts[i], ends[i]) * 1e-3)
        duration += time.perf_counter() - real_t1
        if duration > max_duration:
            break
    ts = numpy.asarray([cpu] + gpu, dtype=numpy.float64)
    return _PerfCaseResult(name, ts, devices=devices)


@contextlib.contextmanager
def _range(sync):
    if sync:
        runtime.deviceSynchronize()
    try:
        yield
    finally:
        if sync:
            runtime.deviceSynchronize()


class time_range(contextlib.ContextDecorator):
    """Mark a range for a profiler (NVTX on a GPU; the model has no
    profiler, so only ``sync=True`` has an effect: it synchronizes the
    device on entry and exit)."""

    def __init__(self, message=None, color_id=None, argb_color=None,
                 sync=False):
        self.message = message
        self.sync = sync

    def __enter__(self):
        self._cm = _range(self.sync)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cm.__exit__(*exc)
