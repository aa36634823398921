"""Streams and events (``cupy.cuda.stream``) on the CPU device model.

A stream is an in-order queue of device work (`_hardware.Queue`) with its
own worker thread: a copy in one stream overlaps a kernel in another, each
operation ending when the profile's cost model says, on the device clock
events read. The legacy null stream synchronizes with every blocking
stream of its device, ``non_blocking=True`` streams do not; ``Stream.ptds``
is a blocking queue per host thread and device. Only events order two
streams. A capture (``begin_capture``) records work into a graph across
every stream it forks to, enforcing CUDA's rules for captures.
"""
import itertools
import os
import threading
import weakref

from .. import _hardware
from .._hardware import api
from . import runtime
from .device import _state
from .graph import Graph

_ptrs = itertools.count(0x1000)
_Queue = _hardware.Queue

# CuPy reads this once, at import: with it, every thread's default stream,
# and its work for ``Stream.null``, is its per-thread stream (``Stream.ptds``;
# cupy_backends/cuda/stream.pyx).
_PTDS = bool(int(os.environ.get("CUPY_CUDA_PER_THREAD_DEFAULT_STREAM",
                                "0")) != 0)


def _default_stream():
    """``Stream.ptds`` if CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1, else null."""
    return Stream.ptds if _PTDS else Stream.null


# -- thread-local current stream -------------------------------------------
class _StreamTLS(threading.local):
    """Each host thread's current stream per device, as CuPy keeps it: a
    stack that ``with stream:`` pushes and pops, and the current stream,
    which ``use()`` sets without pushing (leaving a ``with`` block makes
    the stream below it current again, whatever ``use()`` did inside)."""

    def __init__(self):
        default = _default_stream()
        n = runtime.getDeviceCount()
        self.current = [default] * n
        self.stacks = [[default] for _ in range(n)]
        self.device_ids = []        # the device of each open `with`

    def set_current(self, stream):
        device_id = stream.device_id
        if device_id == -1:
            device_id = runtime.getDevice()
        self.current[device_id] = stream


def get_current_stream(device_id=-1):
    """The current stream of ``device_id`` (default: the current device)."""
    if device_id == -1:
        device_id = runtime._tls.device
    return _tls.current[device_id]


def _queue_of(stream=None):
    """The queue that work for ``stream`` (default: current) goes to."""
    dev = runtime._tls.device
    if stream is None:
        stream = _tls.current[dev]
        if stream.ptr == 0 and _PTDS:
            return _state(dev).ptds_queue()
    ptr = stream.ptr
    if ptr == 0 or ptr == runtime.streamLegacy:
        return (_hardware._states.get(dev) or _state(dev)).null_queue
    if ptr == runtime.streamPerThread:
        return _state(dev).ptds_queue()
    return stream._queue


def _current_stream_ptr(device_id):
    """CuPy's ``get_current_stream_ptr``: the per-thread stream's handle
    when the current one is null and CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1."""
    ptr = _tls.current[device_id].ptr
    if ptr == 0 and _PTDS:
        return runtime.streamPerThread
    return ptr


def get_current_stream_ptr():
    return _current_stream_ptr(runtime._tls.device)


def _capture_error(status, cap, why, hint):
    """Invalidate capture ``cap`` (if any) for ``why``; CUDA's error."""
    if cap is not None:
        cap.invalidate(why)
    return runtime._error(status, hint)


def _blocking_captures(q):
    """The captures of the blocking streams of ``q``'s device when ``q`` is
    the legacy null stream (which synchronizes with them); else none."""
    if not q.legacy:
        return []
    return [b.capture for b in list(q.dev.blocking_queues)
            if b.capture is not None]


def _legacy_while_capturing(q, what):
    """``q`` is the legacy null stream and a blocking stream of its device
    is capturing: using it is invalid (cudaErrorStreamCaptureImplicit) and
    invalidates that capture. True when so."""
    caps = _blocking_captures(q)
    for cap in caps:
        cap.invalidate(what + " of the legacy null stream")
    return bool(caps)


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

    @api("call")
    def __enter__(self):
        dev = self._check_device()
        tls = _tls
        tls.stacks[dev].append(self)
        tls.device_ids.append(dev)
        tls.set_current(self)
        return self

    @api("call")
    def __exit__(self, *args):
        tls = _tls
        dev = tls.device_ids.pop()
        stack = tls.stacks[dev]
        stack.pop()
        tls.set_current(stack[-1])

    def use(self):
        """Make this the current stream of its device (until another
        ``use()``, or the end of the enclosing ``with`` block); returns the
        stream."""
        self._check_device()
        _tls.set_current(self)
        return self

    @property
    def done(self):
        """True if all work queued on the stream has run. Under capture:
        False, and the capture is invalidated (cudaStreamQuery's error)."""
        q = _queue_of(self)
        if q.capture is not None:
            q.capture.invalidate("a query of the capturing stream "
                                 "(Stream.done)")
            return False
        if _legacy_while_capturing(q, "a query (Stream.done)"):
            return False
        return q.query(q.last)

    def synchronize(self):
        """Block the host until all work queued on this stream has run."""
        q = _queue_of(self)
        if _legacy_while_capturing(q, "a synchronize"):
            raise runtime._error(runtime.errorStreamCaptureImplicit,
                "a blocking stream is capturing; end the capture first")
        q.host_wait(q.last)
        _hardware.host_sleep(_hardware.profile.sync_s)   # the round trip

    @api("event")
    def record(self, event=None):
        """Record ``event`` (a new one by default) on this stream."""
        if event is None:
            event = Event()
        event.record(self)
        return event

    @api("event")
    def wait_event(self, event):
        """Make later work on this stream wait until ``event`` has happened.

        During a capture, waiting on an event recorded in the capture forks
        the capture to this stream (its later work is captured into the
        same graph, after the event) or joins it back; waiting on an event
        recorded outside the capture is invalid (cudaEventWaitExternal is
        not modelled)."""
        rec = event._rec
        if rec is None:                     # never recorded: nothing to wait
            return
        q = _queue_of(self)
        _, item, cap = rec
        if cap is None:
            if q.capture is not None:
                raise _capture_error(
                    runtime.errorStreamCaptureIsolation, q.capture,
                    "a wait on an event recorded outside the capture",
                    "a capturing stream can wait only on events recorded "
                    "in the same capture; record the event before "
                    "begin_capture() on the stream itself")
            q.submit(_noop, None, deps=[item])
            return
        if cap.origin.capture is not cap:       # that capture has ended
            raise runtime._error(
                runtime.errorCapturedEvent,
                "the event was last recorded in a capture that has ended; "
                "record it again outside the capture")
        if q.capture is None:
            if q.legacy:
                cap.invalidate("a wait of the legacy null stream")
                raise runtime._error(
                    runtime.errorStreamCaptureImplicit,
                    "the legacy null stream cannot join a capture; fork to "
                    "a cp.cuda.Stream instead")
            q.capture = cap                     # a fork: q joins the capture
            cap.queues.append(q)
        elif q.capture is not cap:
            cap.invalidate("a merge with another capture")
            raise _capture_error(
                runtime.errorStreamCaptureMerge, q.capture,
                "a merge with another capture",
                "the event belongs to another stream's capture")
        q.submit(_noop, None, deps=[item])

    def add_callback(self, callback, arg):
        """Call ``callback(stream, status, arg)`` on a host thread once the
        work queued so far has run (cudaStreamAddCallback: ``status`` is 0,
        cudaSuccess). As in CuPy, it cannot be captured: on a capturing
        stream it raises and invalidates the capture; use
        ``launch_host_func`` there."""
        q = _queue_of(self)
        if q.capture is not None:
            raise _capture_error(
                runtime.errorStreamCaptureUnsupported, q.capture,
                "Stream.add_callback",
                "add_callback cannot be captured; use launch_host_func")
        stream = self
        q.submit(lambda: callback(stream, 0, arg), kind=_hardware.HOST)

    def launch_host_func(self, callback, arg):
        """Run ``callback(arg)`` on the worker once prior work has run; the
        stream waits for it, for as long as it really runs."""
        _queue_of(self).submit(lambda: callback(arg), kind=_hardware.HOST)

    def begin_capture(self, mode=None):
        """Start recording this stream's work into a graph (not running it)."""
        if self.ptr == 0 or self.ptr == runtime.streamLegacy:
            raise RuntimeError(
                "cannot capture on the default (legacy) stream: capture on "
                "a cp.cuda.Stream(non_blocking=True) instead")
        q = _queue_of(self)
        if q.capture is not None:
            raise runtime._error(runtime.errorIllegalState,
                                 "the stream is already capturing")
        q.capture = _hardware.Capture(q)

    def end_capture(self):
        """Stop recording; return the recorded work as a ``Graph``."""
        q = _queue_of(self)
        cap = q.capture
        if cap is None:
            raise runtime._error(
                runtime.errorIllegalState,
                "end_capture() needs a begin_capture() on the same stream")
        if cap.origin is not q:
            raise _capture_error(
                runtime.errorStreamCaptureUnmatched, cap,
                "end_capture() on a forked stream",
                "call end_capture() on the stream that began the capture")
        cap.end()
        if cap.error is not None:
            raise runtime._error(
                runtime.errorStreamCaptureInvalidated,
                f"the capture was invalidated by {cap.error}; capture only "
                "work that stays on the device")
        if cap.unjoined():
            raise runtime._error(
                runtime.errorStreamCaptureUnjoined,
                "a stream the capture forked to was not joined back: record "
                "an event on it and wait_event() on the capturing stream "
                "before end_capture()")
        return Graph._from_nodes(cap.nodes, _queue_of)

    def is_capturing(self):
        """Whether the stream is capturing (cudaStreamIsCapturing). Asked of
        the legacy null stream while a blocking stream of its device
        captures, CUDA refuses (cudaErrorStreamCaptureImplicit) and CuPy
        raises it; a query only, it leaves that capture valid."""
        q = _queue_of(self)
        if _blocking_captures(q):
            raise runtime._error(
                runtime.errorStreamCaptureImplicit,
                "the legacy null stream synchronizes with every blocking "
                "stream, and one is capturing; ask the capturing stream")
        return q.capture is not None

    @property
    def is_non_blocking(self):
        if self.ptr in (0, runtime.streamLegacy, runtime.streamPerThread):
            return False            # the default streams are blocking
        return not self._queue.blocking

    @property
    def priority(self):
        """The stream's priority (cudaStreamGetPriority): lower numbers are
        higher priorities; 0 for the default streams. The model reports it
        but does not schedule by it."""
        if self.ptr in (0, runtime.streamLegacy, runtime.streamPerThread):
            return 0
        return self._queue.priority


def _noop():
    pass


class Stream(_BaseStream):
    """A CUDA stream: an in-order queue of device work.

    ``Stream.null`` is the legacy default stream; ``Stream.ptds`` (or
    ``Stream(ptds=True)``) the per-thread default stream: one queue per host
    thread and device, blocking with respect to the legacy stream, as
    CUDA's cudaStreamPerThread.
    """

    null = None
    ptds = None

    def __init__(self, null=False, non_blocking=False, ptds=False,
                 priority=None):
        if null:
            super().__init__(0, -1)
            self._queue = None
            return
        if ptds:
            super().__init__(runtime.streamPerThread, -1)
            self._queue = None
            return
        if priority is None:
            priority = 0
        least, greatest = _hardware.profile.priority_range
        priority = min(max(int(priority), greatest), least)   # CUDA clamps
        device_id = runtime.getDevice()
        super().__init__(next(_ptrs), device_id)
        self._queue = _Queue(_state(device_id), f"stream-{self.ptr}",
                             blocking=not non_blocking)
        self._queue.priority = priority
        _hardware.streams[self.ptr] = self._queue     # its handle's queue
        weakref.finalize(self, self._queue.close)


Stream.null = Stream(null=True)
Stream.ptds = Stream(ptds=True)
_tls = _StreamTLS()


class Event:
    """A CUDA event: a marker in a stream, to wait on and to time with."""

    @api("call")
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        if interprocess and not disable_timing:
            raise ValueError("Timing must be disabled for interprocess events")
        self.block = block
        self.disable_timing = disable_timing
        self.ptr = next(_ptrs)
        self._rec = None    # (queue, item, capture or None): time item.end

    def _captured(self, what):
        """The capture the event was last recorded in, invalidated since it
        is asked ``what`` (a captured event is not work that runs); None
        for an event recorded outside a capture."""
        rec = self._rec
        cap = None if rec is None else rec[2]
        if cap is not None and cap.origin.capture is cap:
            cap.invalidate(f"{what} of an event recorded in the capture")
        return cap

    @property
    def done(self):
        """True if the recorded point has been reached. Asking an event
        recorded in a capture answers False (and invalidates the capture
        while it lasts), as cudaEventQuery's error does in CuPy."""
        if self._captured("a query (Event.done)") is not None:
            return False
        rec = self._rec
        return rec is None or rec[0].query(rec[1])

    @api("event")
    def record(self, stream=None):
        """Mark the point in ``stream`` (default: current) reached so far:
        the device clock's time when the stream gets there. On a capturing
        stream it records a node of the graph, which other streams may
        wait on (a fork or a join)."""
        q = _queue_of(stream)
        self._rec = (q, q.submit(_noop), q.capture)

    def synchronize(self):
        """Block the host until the recorded point has been reached."""
        if self._captured("a synchronize") is not None:
            raise runtime._error(
                runtime.errorCapturedEvent,
                "the event was recorded in a capture, so it marks no work "
                "that runs; record it outside the capture to wait on it")
        rec = self._rec
        if rec is not None:
            rec[0].host_wait(rec[1])
        _hardware.host_sleep(_hardware.profile.sync_s)   # the round trip


def get_elapsed_time(start_event, end_event):
    """Milliseconds between two recorded, completed events."""
    stamps = []
    for ev in (start_event, end_event):
        if ev._captured("a time query") is not None:
            raise runtime._error(
                runtime.errorCapturedEvent,
                "an event recorded in a capture has no time; record the "
                "events outside the capture, around graph.launch()")
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
