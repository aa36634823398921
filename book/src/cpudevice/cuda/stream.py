"""Streams and events (``cupy.cuda.stream``) on the CPU device model.

A stream is an in-order queue of device work (`_hardware.Queue`) run by its
own worker thread on the simulated hardware: a copy in one stream overlaps
a kernel in another, and each operation ends at the time the device
profile's cost model gives it on the device clock, which events read. The
legacy null stream synchronizes with every blocking stream of its device;
``non_blocking=True`` streams do not. Nothing orders two streams but
events, as on a GPU.
"""
import itertools
import threading
import weakref

from .. import _hardware
from . import runtime
from .device import _state

_ptrs = itertools.count(0x1000)
_all_queues = _hardware._all_queues
_Queue = _hardware.Queue


# -- thread-local current stream -------------------------------------------
class _StreamTLS(threading.local):
    def __init__(self):
        self.streams = {}       # device id -> current stream, if not null
        self.stack = []         # (device id, previous stream) per `with`


_tls = _StreamTLS()


def get_current_stream(device_id=-1):
    """The current stream of ``device_id`` (default: the current device)."""
    if device_id == -1:
        device_id = runtime._tls.device
    return _tls.streams.get(device_id, Stream.null)


def _queue_of(stream=None):
    """The queue that work for ``stream`` (default: current) goes to."""
    if stream is None:
        dev = runtime._tls.device
        stream = _tls.streams.get(dev)
        if stream is None or stream.ptr == 0:
            return _state(dev).null_queue
        return stream._queue
    if stream.ptr == 0:
        return _state(runtime._tls.device).null_queue
    return stream._queue


def get_current_stream_ptr():
    return get_current_stream().ptr


class _BaseStream:
    def __init__(self, ptr, device_id):
        self.ptr = ptr
        self.device_id = device_id

    def __eq__(self, other):
        return isinstance(other, _BaseStream) and self.ptr == other.ptr

    def __hash__(self):
        return self.ptr

    def __repr__(self):
        return f"<{type(self).__name__} {self.ptr} (device {self.device_id})>"

    def _check_device(self):
        cur = runtime.getDevice()
        dev = cur if self.device_id == -1 else self.device_id
        if dev != cur:
            raise RuntimeError(
                f"The device that the stream is created on ({dev}) does not "
                f"match with the current device ({cur})")
        return dev

    def __enter__(self):
        dev = self._check_device()
        m = _tls.streams
        _tls.stack.append((dev, m.get(dev)))
        m[dev] = self
        return self

    def __exit__(self, *args):
        dev, prev = _tls.stack.pop()
        m = _tls.streams
        if prev is None:
            m.pop(dev, None)
        else:
            m[dev] = prev

    def use(self):
        """Make this the current stream of its device."""
        _tls.streams[self._check_device()] = self
        return self

    @property
    def done(self):
        q = _queue_of(self)
        return q.query(q.last)

    def synchronize(self):
        """Block the host until all work queued on this stream has run."""
        q = _queue_of(self)
        q.host_wait(q.last)

    def record(self, event=None):
        """Record ``event`` (a new one by default) on this stream."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    def wait_event(self, event):
        """Make later work on this stream wait until ``event`` has happened."""
        rec = event._rec
        if rec is None:                     # never recorded: nothing to wait
            return
        q = _queue_of(self)
        q.submit(_noop, None, deps=[rec[1]])

    def launch_host_func(self, callback, arg):
        """Run ``callback(arg)`` on the worker once prior work has run; the
        stream waits for it, for as long as it really runs."""
        _queue_of(self).submit(lambda: callback(arg), kind=_hardware.HOST)

    def begin_capture(self, mode=None):
        """Start recording this stream's work into a graph (not running it)."""
        if self.ptr == 0:
            raise RuntimeError(
                "cannot capture on the default (legacy) stream: capture on "
                "a cp.cuda.Stream(non_blocking=True) instead")
        q = _queue_of(self)
        if q.capture is not None:
            raise runtime._error(runtime.errorIllegalState,
                                 "the stream is already capturing")
        q.capture, q.capture_error = [], None

    def end_capture(self):
        """Stop recording and return the recorded work as a ``Graph``."""
        from .graph import Graph
        q = _queue_of(self)
        if q.capture is None:
            raise runtime._error(
                runtime.errorIllegalState,
                "end_capture() needs a begin_capture() on the same stream")
        nodes, why = q.capture, q.capture_error
        q.capture, q.capture_error = None, None
        if why is not None:
            raise runtime._error(
                runtime.errorStreamCaptureInvalidated,
                f"the capture was invalidated by {why}; capture only work "
                "that stays on the device")
        return Graph._from_nodes(nodes)

    def is_capturing(self):
        return _queue_of(self).capture is not None

    @property
    def is_non_blocking(self):
        return self.ptr != 0 and not _queue_of(self).blocking


def _noop():
    pass


class Stream(_BaseStream):
    """A CUDA stream: an in-order queue of device work."""

    null = None
    ptds = None

    def __init__(self, null=False, non_blocking=False, ptds=False,
                 priority=None):
        if null:
            super().__init__(0, -1)
            self._queue = None
            return
        if ptds:
            raise NotImplementedError(
                "the CPU device model has no per-thread default stream")
        device_id = runtime.getDevice()
        super().__init__(next(_ptrs), device_id)
        self._queue = _Queue(_state(device_id), f"stream-{self.ptr}",
                             blocking=not non_blocking)
        weakref.finalize(self, self._queue.close)


Stream.null = Stream(null=True)


class Event:
    """A CUDA event: a marker in a stream, to wait on and to time with."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        if interprocess and not disable_timing:
            raise ValueError("Timing must be disabled for interprocess events")
        self.block = block
        self.disable_timing = disable_timing
        self.ptr = next(_ptrs)
        self._rec = None            # (queue, item): its time is item.end

    @property
    def done(self):
        rec = self._rec
        return rec is None or rec[0].query(rec[1])

    def record(self, stream=None):
        """Mark the point in ``stream`` (default: current) reached so far:
        the device clock's time when the stream gets there."""
        q = _queue_of(stream)
        if q.capture is not None:
            raise NotImplementedError(
                "the CPU device model does not capture events into graphs")
        self._rec = (q, q.submit(_noop))

    def synchronize(self):
        """Block the host until the recorded point has been reached."""
        rec = self._rec
        if rec is not None:
            rec[0].host_wait(rec[1])


def get_elapsed_time(start_event, end_event):
    """Milliseconds between two recorded, completed events."""
    stamps = []
    for ev in (start_event, end_event):
        if ev._rec is None or ev.disable_timing:
            raise runtime._error(
                runtime.errorInvalidResourceHandle,
                "both events must be recorded, and created without "
                "disable_timing, before asking for the time between them")
        if not ev.done:
            raise runtime._error(
                runtime.errorNotReady,
                "an event has not happened yet; call "
                "end_event.synchronize() first")
        stamps.append(ev._rec[1].end)
    return (stamps[1] - stamps[0]) * 1e3
