"""Streams, events and the workers that run them (``cupy.cuda.stream``).

A stream is an in-order queue of device work run by its own worker thread.
Each item holds an engine (a device lock: compute, or the copy engine of one
direction) while it runs, so a copy in one stream overlaps a kernel in
another while two kernels serialize. The legacy null stream synchronizes
with every blocking stream of its device; ``non_blocking=True`` streams do
not. Nothing orders two streams but events, as on a GPU.
"""
import atexit
import itertools
import os
import threading
import time
import weakref
from collections import deque

import numpy

from . import runtime
from .device import _state

_IDLE_S = 1.0          # a worker with nothing to do for this long exits
_LAUNCH_BLOCKING = os.environ.get("CUDA_LAUNCH_BLOCKING", "0") == "1"
_ptrs = itertools.count(0x1000)
_all_queues = weakref.WeakSet()


class _Queue:
    """One in-order queue of work for one device, and its worker thread."""

    def __init__(self, dev, name, legacy=False, blocking=True):
        self.dev = dev
        self.name = name
        self.legacy = legacy
        self.blocking = blocking
        self.items = deque()
        self.cv = threading.Condition(threading.Lock())
        self.enqueued = 0           # sequence number of the last item queued
        self.completed = 0          # sequence number of the last item done
        self.reached = 0.0          # when the stream reached the running item
        self.error = None           # first failure not yet reported
        self.thread = None
        self.idle = False           # the worker sleeps, waiting for items
        self.awaited = []           # the items host threads wait for
        self.closed = False
        self.capture = None         # list of (engine, fn) while capturing
        self.capture_error = None
        if blocking and not legacy:
            dev.blocking_queues.add(self)
        _all_queues.add(self)

    # -- host side ---------------------------------------------------------
    def submit(self, fn, engine=None, deps=()):
        """Queue ``fn`` to run on ``engine`` after ``deps``; return its seq."""
        if self.capture is not None:
            if deps:
                self._invalidate_capture("cross-stream dependencies")
            self.capture.append((engine, fn))
            return None
        legacy = self._legacy_deps()
        if legacy:
            deps = list(deps) + legacy
        with self.cv:
            if self.closed:
                raise RuntimeError(f"{self.name} stream has been destroyed")
            self.enqueued += 1
            seq = self.enqueued
            self.items.append((seq, engine, fn, deps))
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._work, name=f"cpudevice-{self.name}",
                    daemon=True)
                self.thread.start()
            elif self.idle:
                self.cv.notify()
        if _LAUNCH_BLOCKING:
            self.host_wait(seq)
        return seq

    def _legacy_deps(self):
        dev = self.dev
        if self.legacy:
            return [(q, q.enqueued) for q in list(dev.blocking_queues)
                    if q.enqueued > q.completed]
        if self.blocking and dev._null is not None:
            null = dev._null
            if null.enqueued > null.completed:
                return [(null, null.enqueued)]
        return []

    def check_not_capturing(self, what="synchronize"):
        if self.capture is not None:
            self._invalidate_capture(what)
            raise runtime._error(
                runtime.errorStreamCaptureUnsupported,
                f"{what} waits for the host, which a stream under capture "
                "cannot do; end the capture first")

    def _invalidate_capture(self, why):
        if self.capture_error is None:
            self.capture_error = why

    def wait_done(self, seq, timeout=None):
        """Wait until item ``seq`` has run; False if ``timeout`` passed."""
        if self.completed >= seq:
            return True
        with self.cv:
            self.awaited.append(seq)
            try:
                return self.cv.wait_for(lambda: self.completed >= seq,
                                        timeout)
            finally:
                self.awaited.remove(seq)

    def host_wait(self, seq, timeout=None):
        """Block the host until item ``seq`` has run; raise its failure."""
        self.check_not_capturing()
        if not self.wait_done(seq, timeout):
            raise TimeoutError(f"{self.name} stream did not reach item "
                               f"{seq} within {timeout} s")
        if self.error is not None:
            with self.cv:
                err, self.error = self.error, None
            if err is not None:
                raise err

    def query(self, seq):
        return self.completed >= seq

    def close(self):
        """Destroy the queue: its worker finishes what is queued, then exits."""
        self.dev.blocking_queues.discard(self)
        with self.cv:
            self.closed = True
            self.cv.notify_all()

    # -- device side -------------------------------------------------------
    def _work(self):
        numpy.seterr(all="ignore")      # a GPU does not warn on overflow
        items, cv = self.items, self.cv
        finished = 0.0                  # when the previous item finished
        while True:
            if not items:
                with cv:
                    if not items and not self.closed:
                        self.idle = True
                        cv.wait_for(lambda: items or self.closed, _IDLE_S)
                        self.idle = False
                    if not items:
                        self.thread = None
                        return
            seq, engine, fn, deps = items.popleft()
            self.reached = finished
            for q, s in deps:
                if q.completed < s:
                    q.wait_done(s)
                    self.reached = time.perf_counter()
            try:
                if engine is None:
                    fn()
                else:
                    with engine:
                        fn()
            except BaseException as e:      # reported at the next sync
                with cv:
                    if self.error is None:
                        self.error = e
            finished = time.perf_counter()
            fn = deps = None        # done: keep no buffer of it alive
            self.completed = seq
            # Wake the host only when an item it waits for is done: a wake-up
            # per item would hand the GIL back and forth for nothing.
            if seq >= min(self.awaited, default=seq + 1):
                with cv:
                    cv.notify_all()


@atexit.register
def _drain_at_exit():
    for q in list(_all_queues):
        q.close()
    for q in list(_all_queues):
        t = q.thread
        if t is not None:
            t.join(timeout=10)


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
        return q.query(q.enqueued)

    def synchronize(self):
        """Block the host until all work queued on this stream has run."""
        q = _queue_of(self)
        q.host_wait(q.enqueued)

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
        q.submit(_noop, None, deps=[(rec[0], rec[1])])

    def launch_host_func(self, callback, arg):
        """Run ``callback(arg)`` on the worker once prior work has run."""
        _queue_of(self).submit(lambda: callback(arg))

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
        self._rec = None            # (queue, seq, [timestamp])

    @property
    def done(self):
        rec = self._rec
        return rec is None or rec[0].query(rec[1])

    def record(self, stream=None):
        """Mark the point in ``stream`` (default: current) reached so far."""
        q = _queue_of(stream)
        if q.capture is not None:
            raise NotImplementedError(
                "the CPU device model does not capture events into graphs")
        stamp = [None]
        recorded = time.perf_counter()

        def mark():
            # Stamp the moment the stream reached this point: when it was
            # recorded, or when the work before it finished, whichever is
            # later; not when the worker thread got round to the mark.
            stamp[0] = max(recorded, q.reached)
        self._rec = (q, q.submit(mark), stamp)

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
        stamps.append(ev._rec[2][0])
    return (stamps[1] - stamps[0]) * 1e3
