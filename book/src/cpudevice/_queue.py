"""The streams' queues of the CPU device model, and their workers.

A `Queue` is one in-order stream of device work. The host thread *submits*
an `Item` (a kernel, a copy, an event mark, a host function); the queue's
worker thread does the item's real work (NumPy) in order, after the item's
dependencies have really run, so results and races are real. Each item also
gets a modelled start and end on the device clock (`_clock`), booked on its
engine (`_hardware.Engine`) from the profile's costs (`_profile`).
"""
import atexit
import os
import threading
import time
import weakref
from collections import deque

import numpy

from . import _errors, _fork, _profile
from ._clock import _host, _running, clock, host_now, host_wait_until

# -- queues and their workers -------------------------------------------------
_IDLE_S = 1.0          # a worker with nothing to do for this long exits
_LAUNCH_BLOCKING = os.environ.get("CUDA_LAUNCH_BLOCKING", "0") == "1"
_all_queues = weakref.WeakSet()

KERNEL, COPY, HOST, MARK = "kernel", "copy", "host", "mark"


class Item:
    """One operation in a queue, and its times on the device clock."""

    __slots__ = ("q", "seq", "kind", "engine", "fn", "deps", "issued",
                 "lag", "latency", "work", "real", "start", "end", "ticket")

    def __init__(self, q, kind, engine, fn, deps, latency, work, real):
        self.q, self.kind, self.engine, self.fn = q, kind, engine, fn
        self.deps = deps
        self.latency, self.work, self.real = latency, work, real
        h = _host       # the issuer's `host_lag` and `host_now`, inline
        self.lag = h.lag
        self.issued = h.v if h.depth else time.perf_counter() - h.lag
        self.seq = 0
        self.start = self.end = None
        self.ticket = 0     # its engine's `issued` at its issue (`hold`)

    def done(self):
        """Really finished, and past its modelled end (in the view of the
        thread that issued it: when a host wait for it would return)."""
        return (self.q.completed >= self.seq and self.end is not None
                and self.end + self.lag <= clock())


class Capture:
    """One stream capture: the nodes recorded so far, in issue order (a
    topological order), shared by the origin stream and every stream that
    joined it by waiting on an event recorded in it (a fork)."""

    def __init__(self, origin):
        self.origin = origin
        self.nodes = []
        self.tails = {}             # queue -> its last node in the capture
        self.queues = [origin]      # the origin, then each forked stream
        self.error = None           # why the capture is invalidated

    def invalidate(self, why):
        if self.error is None:
            self.error = why

    def add(self, q, item):
        prev = self.tails.get(q)
        item.deps = ([prev] if prev is not None else []) + list(
            item.deps or ())
        self.nodes.append(item)
        self.tails[q] = item
        return item

    def unjoined(self):
        """The forked queues whose last node the origin's last node does not
        depend on (CUDA requires every fork to be joined back)."""
        seen, todo = set(), [self.tails.get(self.origin)]
        while todo:
            n = todo.pop()
            if n is None or id(n) in seen:
                continue
            seen.add(id(n))
            todo.extend(n.deps or ())
        return [q for q in self.queues[1:]
                if self.tails.get(q) is not None and
                id(self.tails[q]) not in seen]

    def end(self):
        for q in self.queues:
            q.capture = None


class WorkerError(RuntimeError):
    """The model's own bookkeeping failed in a stream's worker."""


class Queue:
    """One in-order queue of work for one device, and its worker thread."""

    def __init__(self, dev, name, legacy=False, blocking=True):
        self.dev = dev
        self.name = name
        self.legacy = legacy
        self.blocking = blocking
        self.items = deque()
        self.lock = threading.Lock()    # cv's: cheaper to enter than cv
        self.cv = threading.Condition(self.lock)
        self.enqueued = 0           # sequence number of the last item queued
        self.completed = 0          # sequence number of the last item done
        self.last = None            # the last item queued
        self.tail = 0.0             # modelled end of the last item run
        self.error = None           # first failure not yet reported
        self.fatal = None           # the worker's own failure, if any
        self.thread = None
        self.idle = False           # the worker sleeps, waiting for items
        self.awaited = []           # the items host threads wait for
        self.closed = False
        self.capture = None         # the `Capture` while capturing
        self.priority = 0           # reported; not used to schedule
        if blocking and not legacy:
            dev.blocking_queues.add(self)
        _all_queues.add(self)
        _fork.started = True        # the runtime has started

    # -- host side ---------------------------------------------------------
    def submit(self, fn, engine=None, deps=(), cost=None, kind=None,
               real=False, issued=None):
        """Queue ``fn`` to run on ``engine`` after ``deps`` (items of other
        queues), costing ``cost = (latency, work)`` seconds of device time;
        return its `Item` (None while capturing). ``kind`` is "kernel",
        "copy", "host" (a host function: its real duration is its device
        time) or "mark" (an event: no time). ``real=True`` makes the real
        duration of ``fn`` count as well (an operation that waits on the
        host). ``issued`` is when the device gets it, if later than now
        (after the host has staged its data, say)."""
        _fork.check_not_forked()
        if kind is None:
            kind = (MARK if engine is None else
                    KERNEL if engine is self.dev.compute else COPY)
        if cost is None:
            prof = _profile.profile
            cost = ((prof.launch_s if kind == KERNEL else
                     prof.copy_latency_s if kind == COPY else 0.0), 0.0)
        item = Item(self, kind, engine, fn, deps, cost[0], cost[1], real)
        if issued is not None and issued > item.issued:
            item.issued = issued
        if self.capture is not None:
            return self.capture.add(self, item)
        legacy = self._legacy_deps()
        if legacy:
            item.deps = list(deps) + legacy
        if real and engine is not None:
            item.ticket = engine.hold()     # the engine is its till it has run
        else:
            if engine is not None:
                item.ticket = engine.issued
            self._book(item)
        with self.lock:
            if self.closed:
                raise RuntimeError(f"{self.name} stream has been destroyed")
            self.enqueued += 1
            item.seq = self.enqueued
            self.last = item
            if self.fatal is not None:      # lost: the next wait says so
                item.fn = item.deps = None
                item.start = item.end = item.issued
                self.completed = item.seq
                self._release(item)
                return item
            self.items.append(item)
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._work, name=f"cpudevice-{self.name}",
                    daemon=True)
                self.thread.start()
            elif self.idle:     # wake it once, not at each item until it runs
                self.idle = False
                self.cv.notify()
        if _LAUNCH_BLOCKING:
            self.host_wait(item)
        return item

    def _book(self, item):
        """Give ``item`` its modelled start and end now, in issue order, when
        everything it follows has known times; otherwise its worker does,
        when it gets to it (after a host function, whose duration is real).
        Booking in issue order keeps the schedule independent of the order
        in which the workers really get through their work."""
        if item.kind == HOST or (item.engine is not None
                                 and item.engine.holds):
            return
        ready = item.issued
        prev = self.last
        if prev is not None:
            if prev.end is None:
                return
            ready = max(ready, prev.end)
        for dep in item.deps or ():
            if dep.end is None:
                return
            ready = max(ready, dep.end)
        item.start = ready
        item.end = self._schedule(item, ready)

    def pending(self, now):
        """The last item, while it has not finished (really, or on the
        device clock at ``now``: the caller's view, where its next item is
        issued; not `done()`, the host's question); else None."""
        last = self.last
        if last is None or (self.completed >= last.seq and
                            last.end is not None and last.end <= now):
            return None
        return last

    def _legacy_deps(self):
        """The unfinished last items that work queued now must follow (on
        the null stream: each blocking stream's; refused while one captures)"""
        dev = self.dev
        if self.legacy:
            queues = list(dev.blocking_queues)
            if not queues:
                return queues
            self._check_no_blocking_capture(queues)
            now = host_now()
            return [last for last in (q.pending(now) for q in queues)
                    if last is not None]
        if self.blocking and dev._null is not None:
            last = dev._null.pending(host_now())
            if last is not None:
                return [last]
        return []

    def check_not_capturing(self, what="synchronize"):
        if self.capture is not None:
            self.capture.invalidate(what)
            raise _errors._error(
                _errors.errorStreamCaptureUnsupported,
                f"{what} waits for the host, which a stream under capture "
                "cannot do; end the capture first")

    @staticmethod
    def _check_no_blocking_capture(queues):
        """Work on the legacy null stream while a blocking stream of its
        device (``queues``) captures would make it wait for the capture: CUDA
        refuses that (cudaErrorStreamCaptureImplicit), invalidating it."""
        capturing = [q for q in queues if q.capture is not None]
        if capturing:
            for q in capturing:
                q.capture.invalidate("work on the legacy null stream")
            raise _errors._error(
                _errors.errorStreamCaptureImplicit,
                "the legacy null stream synchronizes with every blocking "
                "stream, and one is capturing; capture on a "
                "Stream(non_blocking=True), or queue this work on another "
                "stream")

    def wait_done(self, seq, timeout=None):
        """Wait until item ``seq`` has really run; False on timeout."""
        if self.completed >= seq:
            return True
        with self.cv:
            self.awaited.append(seq)
            try:
                return self.cv.wait_for(lambda: self.completed >= seq,
                                        timeout)
            finally:
                self.awaited.remove(seq)

    def host_wait(self, item, timeout=None):
        """Block the host until ``item`` (an `Item`, a sequence number, or
        None for nothing queued yet) has really run and the calling thread's
        view of the device clock has passed its modelled end (`_clock`: the
        wait costs the view what the model says it lasts); raise a failure
        of the queue's work."""
        _fork.check_not_forked()
        self.check_not_capturing()
        since = host_now()
        if item is None:
            seq = 0
        elif isinstance(item, Item):
            seq = item.seq
        else:
            seq = item
            item = self.last if self.last is not None and \
                self.last.seq == seq else None
        if not self.wait_done(seq, timeout):
            raise TimeoutError(f"{self.name} stream did not reach item "
                               f"{seq} within {timeout} s")
        for hook in getattr(self.dev, "sync_hooks", ()):
            hook()          # a synchronization: a pool may release memory
        self._raise_errors()
        if item is not None and item.end is not None:
            host_wait_until(item.end, since, item.lag)

    def _raise_errors(self):
        if self.fatal is not None:
            raise WorkerError(
                f"the worker of the {self.name} stream failed in the "
                "model's own bookkeeping; the stream's work is lost "
                f"({self.fatal!r})") from self.fatal
        if self.error is not None:
            with self.cv:
                err, self.error = self.error, None
            if err is not None:
                raise err

    def query(self, item):
        if isinstance(item, Item):
            return item.done()
        return item is None or self.completed >= item

    def close(self):
        """Destroy the queue: its worker finishes its work, then exits."""
        self.dev.blocking_queues.discard(self)
        with self.cv:
            self.closed = True
            self.cv.notify_all()

    # -- device side -------------------------------------------------------
    def _work(self):
        try:
            self._run()
        except BaseException as e:      # the model's own failure
            with self.cv:
                self.fatal = e
                for item in self.items:
                    self._release(item)
                self.items.clear()
                self.completed = self.enqueued
                self.thread = None
                self.cv.notify_all()

    def _run(self):
        numpy.seterr(all="ignore")      # a GPU does not warn on overflow
        items, cv = self.items, self.cv
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
            item = items.popleft()
            ready = max(item.issued, self.tail)
            for dep in item.deps or ():
                dq = dep.q
                if dq.completed < dep.seq:
                    dq.wait_done(dep.seq)
                if dep.end is not None and dep.end > ready:
                    ready = dep.end
            if item.end is not None:            # booked when issued
                self._call(item.fn, item.engine, item)
            elif item.kind == HOST or item.real:
                item.start = ready
                item.end = self._run_timed(item, ready)
            else:
                if item.engine is not None and item.engine.holds:
                    item.engine.wait_free(item.ticket)
                item.start = ready
                item.end = self._schedule(item, ready)
                self._call(item.fn, item.engine, item)
            self.tail = item.end
            item.fn = item.deps = None      # keep no buffer of it alive
            # Written outside cv: this worker is its one writer and it only
            # grows; a host that must block re-reads it under cv after
            # joining `awaited`, which is read below (README.md, Locks).
            self.completed = item.seq
            # Wake the host only when an item it waits for is done: a wake-up
            # per item would hand the GIL back and forth for nothing. (It
            # may empty meanwhile: min() has a default.)
            if self.awaited and item.seq >= min(self.awaited,
                                                default=item.seq + 1):
                with cv:
                    cv.notify_all()

    @staticmethod
    def _schedule(item, ready):
        """Book the item's engine; return its modelled end."""
        engine, latency, work = item.engine, item.latency, item.work
        if engine is None:
            return ready + latency + work
        if item.kind == KERNEL:     # latencies overlap, work takes turns
            return engine.place(ready + latency, work) + work
        return engine.place(ready, latency + work) + latency + work

    def _run_timed(self, item, ready):
        """Run an item whose real duration is device time (a host function,
        or work that waits on the host): it ends no earlier than it really
        did, in the view of the host thread that issued it (its real end
        less that thread's lag, `_clock`)."""
        engine = item.engine
        t0 = clock()
        if engine is None:
            self._call(item.fn, None)
            t1 = clock()
            return max(ready + item.latency + item.work + t1 - t0,
                       t1 - item.lag)
        try:
            self._call(item.fn, engine)
            t1 = clock()
            begin = ready + (item.latency if item.kind == KERNEL else 0.0)
            end = engine.append(begin, max(item.work, t1 - t0),
                                t1 - item.lag)
        finally:
            self._release(item)
        return end

    @staticmethod
    def _release(item):
        """A real-time item has run (or never will): free its engine."""
        engine = item.engine
        if item.real and engine is not None:
            engine.release(item.ticket)

    def _call(self, fn, engine, item=None):
        if engine is not None:
            engine.running += 1
        if item is not None and item.end is not None:
            # What the GPU's %globaltimer reads inside this kernel: the
            # start of its work on the device clock, then its end.
            _running.span = [item.end - item.work, item.end, 0]
        try:
            fn()
        except BaseException as e:      # reported at the next sync
            with self.cv:
                if self.error is None:
                    self.error = e
        finally:
            _running.span = None
            if engine is not None:
                engine.running -= 1


@atexit.register
def _drain_at_exit():
    for q in list(_all_queues):
        q.close()
    for q in list(_all_queues):
        t = q.thread
        if t is not None:
            t.join(timeout=10)
