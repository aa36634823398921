"""Timers for asynchronous device work: the host clock and CUDA events.

A device call returns once its work is queued, so a host clock stopped right
after it measures only the queueing. `Benchmark` stops the clock with or
without waiting for the device first; `EventTimer` times the device itself,
with events recorded on a stream.
"""
import time

from . import cp


class Benchmark:
    """Host wall-clock time of a ``with`` block, in ``.seconds``.

    ``sync=True`` waits for all work queued on the current device, on entry
    (so earlier work is not billed to the block) and before stopping the
    clock (so the block's work is); ``sync=False`` times only the host.
    With a ``description``, prints ``description: ... ms`` on exit (d2l's
    ``Benchmark``).
    """

    def __init__(self, description=None, sync=False):
        self.description = description
        self.sync = sync
        self.seconds = None

    def __enter__(self):
        if self.sync:
            cp.cuda.Device().synchronize()
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.sync and exc_type is None:
            cp.cuda.Device().synchronize()
        self.seconds = time.perf_counter() - self._start
        if self.description is not None and exc_type is None:
            print(f"{self.description}: {self.seconds * 1e3:.3f} ms")
        return False


class EventTimer:
    """Device time of the work a ``with`` block queues on one stream.

    Records the event ``.start`` on ``stream`` (default: the current stream)
    on entry and ``.end`` on exit; neither waits. Reading ``.seconds`` waits
    for ``.end`` and returns ``cp.cuda.get_elapsed_time`` in seconds.
    """

    def __init__(self, stream=None):
        self.stream = stream
        self.start = cp.cuda.Event()
        self.end = cp.cuda.Event()

    def __enter__(self):
        if self.stream is None:
            self.stream = cp.cuda.get_current_stream()
        self.start.record(self.stream)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.end.record(self.stream)
        return False

    @property
    def seconds(self):
        """Seconds of device time between the two events (waits for them)."""
        self.end.synchronize()
        return cp.cuda.get_elapsed_time(self.start, self.end) / 1e3
