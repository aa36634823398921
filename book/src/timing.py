"""Timers for asynchronous device work: the book's host clock and CUDA events.

A device call returns once its work is queued, so a host clock stopped right
after it measures only the queueing. `Benchmark` stops the clock with or
without waiting for the device first; `EventTimer` times the device itself,
with events recorded on a stream.

`host_clock` is the book's host clock: ``time.perf_counter`` on a GPU, and
on the CPU device model the calling thread's view of the modelled device
clock, on which a host clock that waits for device work agrees with the
events, as on a GPU. A number read from it on the model is *modelled*, and
is printed with `MODELLED` after its unit. A bare ``time.perf_counter``
stays real on both.
"""
import time

from . import BACKEND, cp
from .backend import choose_host_clock

_clock = choose_host_clock(BACKEND)

#: The note printed after a time read from `host_clock`: ``""`` on a GPU,
#: ``" (modelled)"`` on the CPU device model.
MODELLED = "" if _clock is time.perf_counter else " (modelled)"


def host_clock():
    """The book's host clock, in seconds. On a GPU, ``time.perf_counter``.
    On the CPU device model, this thread's view of the modelled device
    clock: your Python and NumPy pass at real speed, each call into the
    model costs what the call costs CuPy, and each wait lasts as long as
    the model says (`backends.md`)."""
    return _clock()


class Benchmark:
    """Host time of a ``with`` block by the book's `host_clock`, in
    ``.seconds``, and its real duration by ``time.perf_counter``, in
    ``.real_seconds`` (on a GPU the two are one clock).

    ``sync=True`` waits for all work queued on the current device, on entry
    (so earlier work is not billed to the block) and before stopping the
    clock (so the block's work is); ``sync=False`` times only the host.
    With a ``description``, prints ``description: ... ms`` on exit (d2l's
    ``Benchmark``), followed by `MODELLED`.
    """

    def __init__(self, description=None, sync=False):
        self.description = description
        self.sync = sync
        self.seconds = None
        self.real_seconds = None

    def __enter__(self):
        if self.sync:
            cp.cuda.Device().synchronize()
        self._real_start = time.perf_counter()
        self._start = host_clock()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.sync and exc_type is None:
            cp.cuda.Device().synchronize()
        self.seconds = host_clock() - self._start
        self.real_seconds = time.perf_counter() - self._real_start
        if self.description is not None and exc_type is None:
            print(f"{self.description}: {self.seconds * 1e3:.3f} ms"
                  f"{MODELLED}")
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
