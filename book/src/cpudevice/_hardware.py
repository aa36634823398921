"""The simulated hardware under the CPU device model: engines and a clock.

Everything the CuPy-shaped modules above it (``cuda.runtime``, ``cuda.device``,
``cuda.stream``, the arrays and kernels) need from "the GPU" lives here:

* the **device profile** (``profiles/h100.json`` by default, another JSON
  file with ``BOOK_CPU_PROFILE=path``): the device's properties and the
  costs of its operations, calibrated from a real GPU's measurements;
* the **cost model**: a kernel costs a launch latency plus its bytes over
  the memory bandwidth (or its flops over the throughput, or its items at a
  per-kernel rate from the profile, whichever is longest); a copy costs a
  latency plus its bytes over the link's bandwidth; a copy from pageable
  memory is first staged by the host through a bounce buffer;
* the **engines** of each device: a compute engine and one copy engine per
  direction. A copy engine runs one copy at a time. The compute engine
  runs one kernel's *work* at a time (a kernel that moves many bytes fills
  the device), while launch latencies overlap, so small kernels from
  different streams run side by side;
* the **streams' queues** and their worker threads. A worker does each
  operation's real work (NumPy), in stream order and after the operation's
  dependencies really finished, so results and races are real;
* the **device clock**: each operation gets a modelled start, ``max(issued
  by the host, previous operation of its stream, its dependencies, its
  engine free)``, and end, ``start + cost``. Events read this clock. The
  device clock is the host's ``time.perf_counter``: a host wait returns when
  the work has really finished *and* the clock has passed its modelled end
  (sleeping, not spinning), so host-measured times show the device's
  proportions too. When the real work takes longer than its modelled time,
  the host waits for the real work: the wait is then longer than the model
  says, while the events still read the modelled times.

Nothing here is CuPy's API; it imports nothing from ``cuda``.
"""
import atexit
import bisect
import json
import os
import threading
import time
import weakref
from collections import deque

import numpy

# -- configuration: devices and memory ---------------------------------------


def _parse_bytes(text):
    """``'2GiB'`` / ``'512MiB'`` / ``'1e9'`` -> bytes."""
    text = str(text).strip()
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
             "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "B": 1}
    upper = text.upper()
    for unit, scale in units.items():
        if upper.endswith(unit):
            return int(float(text[:-len(unit)]) * scale)
    return int(float(text))


def _config():
    n = int(os.environ.get("BOOK_CPU_DEVICES", "2"))
    if n < 1:
        raise ValueError(f"BOOK_CPU_DEVICES={n}: need at least one device")
    mem = _parse_bytes(os.environ.get("BOOK_CPU_DEVICE_MEMORY", "1GiB"))
    if mem < 2**20:
        raise ValueError(f"BOOK_CPU_DEVICE_MEMORY={mem} bytes: need 1 MiB "
                         "or more")
    return n, mem


N_DEVICES, CAPACITY = _config()

# -- the device profile ------------------------------------------------------
DEFAULT_PROFILE = os.path.join(os.path.dirname(__file__), "profiles",
                               "h100.json")


class Profile:
    """A device profile: properties and costs, read from a JSON file.

    Costs are kept in seconds and bytes per second; ``kernels`` maps a
    kernel name to its own cost data (``ns_per_item``).
    """

    def __init__(self, data, path=None):
        self.path = path
        self.data = data
        self.name = data["name"]
        self.device = data.get("device", self.name)
        self.properties = dict(data.get("properties", {}))
        host, kern, copy = data["host"], data["kernel"], data["copy"]
        self.context_create_s = host["context_create_ms"] * 1e-3
        self.module_load_s = host["module_load_ms"] * 1e-3
        self.stage_bps = host["pageable_stage_gbps"] * 1e9
        self.launch_s = kern["launch_us"] * 1e-6
        self.memory_bps = kern["memory_gbps"] * 1e9
        self.flops = kern["flops_tflops"] * 1e12
        self.graph_launch_s = kern.get("graph_launch_us",
                                       kern["launch_us"]) * 1e-6
        self.copy_latency_s = copy["latency_us"] * 1e-6
        self.h2d_bps = copy["h2d_pinned_gbps"] * 1e9
        self.d2h_bps = copy["d2h_pinned_gbps"] * 1e9
        self.kernels = {name: dict(v) for name, v in
                        data.get("kernels", {}).items()}
        streams = data.get("streams", {})
        # cudaDeviceGetStreamPriorityRange: (least, greatest); lower numbers
        # are higher priorities. Reported, not used to schedule.
        self.priority_range = (streams.get("least_priority", 0),
                               streams.get("greatest_priority", 0))

    def scaled(self, time=1.0, copies=1.0):
        """This profile with every device cost ``time`` times as long (all
        ratios kept) and copies ``copies`` times as fast."""
        data = json.loads(json.dumps(self.data))
        host, kern, copy = data["host"], data["kernel"], data["copy"]
        host["pageable_stage_gbps"] /= time
        kern["launch_us"] *= time
        kern["graph_launch_us"] = kern.get("graph_launch_us",
                                           kern["launch_us"] / time) * time
        kern["memory_gbps"] /= time
        kern["flops_tflops"] /= time
        copy["latency_us"] *= time / copies
        copy["h2d_pinned_gbps"] *= copies / time
        copy["d2h_pinned_gbps"] *= copies / time
        host["pageable_stage_gbps"] *= copies
        for own in data.get("kernels", {}).values():
            own["ns_per_item"] *= time
            if "ns_per_step" in own:
                own["ns_per_step"] *= time
        return Profile(data, self.path)

    @classmethod
    def load(cls, path=None):
        path = path or os.environ.get("BOOK_CPU_PROFILE") or DEFAULT_PROFILE
        with open(path) as f:
            return cls(json.load(f), path)

    # -- the cost model (seconds of device time) --
    def kernel_cost(self, nbytes=0, flops=0, items=0, name=None, steps=1):
        """``(latency, work)`` of a kernel moving ``nbytes`` bytes, doing
        ``flops`` operations over ``items`` elements. A kernel the profile
        lists has its own rate: ``ns_per_item`` for each element and each
        of its ``steps`` (a loop inside the kernel, whose length its
        argument named ``per`` gives, or for a RawKernel its argument at
        place ``per``), and at least ``ns_per_step`` for
        each step (a chain of dependent operations)."""
        work = max(nbytes / self.memory_bps, flops / self.flops)
        own = self.kernels.get(name) if name is not None else None
        if own is not None and items:
            ns = max(items * own["ns_per_item"], own.get("ns_per_step", 0))
            work = max(work, steps * ns * 1e-9)
        return self.launch_s, work

    def copy_cost(self, nbytes, direction):
        """``(latency, work)`` of a DMA copy of ``nbytes`` (``"H2D"`` or
        ``"D2H"``) between pinned host memory and the device."""
        bps = self.h2d_bps if direction == "H2D" else self.d2h_bps
        return self.copy_latency_s, nbytes / bps

    def stage_cost(self, nbytes):
        """Host seconds to copy ``nbytes`` of pageable memory through the
        driver's bounce buffer (the host does it, the host waits)."""
        return nbytes / self.stage_bps


profile = Profile.load()


def set_profile(new):
    """Use ``new`` (a `Profile`, a dict or a path) from now on; return the
    previous profile. For tests and experiments: work already queued keeps
    the costs it was given."""
    global profile
    old = profile
    if isinstance(new, dict):
        new = Profile(new)
    elif not isinstance(new, Profile):
        new = Profile.load(new)
    profile = new
    return old


# -- the device clock ---------------------------------------------------------
def clock():
    """The device clock, in seconds: the host's ``time.perf_counter``."""
    return time.perf_counter()


def sleep_until(t):
    """Sleep (without spinning) until the device clock reads ``t``."""
    d = t - clock()
    while d > 0:
        time.sleep(d)
        d = t - clock()


class _Running(threading.local):
    span = None         # [work start, end, reads] of the item a worker runs


_running = _Running()


def globaltimer_ns():
    """``%globaltimer`` as a kernel's twin reads it, in nanoseconds of the
    device clock. Inside a booked item the first read gives the start of
    its work and every later read its end, as a kernel's first block and
    last block would read them; anywhere else, the clock now. The twins
    read it through `src.twins.globaltimer_ns`, which the model installs."""
    span = _running.span
    if span is None:
        return int(clock() * 1e9)
    t = span[0] if span[2] == 0 else span[1]
    span[2] += 1
    return int(t * 1e9)


# -- engines ------------------------------------------------------------------
_KEEP = 512         # busy intervals an engine remembers


class Engine:
    """One engine of a device: a schedule of the intervals it is busy.

    ``place(ready, duration)`` books the earliest free interval of
    ``duration`` that starts at ``ready`` or later and returns its start.
    Operations are booked as the workers reach them, so an operation that
    became ready early can still fill a gap left before a later one.
    """

    def __init__(self, name):
        self.name = name
        self.lock = threading.Lock()
        self.freed = threading.Condition(self.lock)
        self.starts = []
        self.ends = []
        self.running = 0        # operations whose real work runs now
        self.held = 0           # real-time operations issued, not yet run

    def wait_free(self):
        """Wait (really) until no real-time operation holds the engine."""
        with self.freed:
            self.freed.wait_for(lambda: self.held == 0)

    def place(self, ready, duration):
        with self.lock:
            starts, ends = self.starts, self.ends
            if not starts or ready >= ends[-1]:
                t = ready
                i = len(starts)
            else:
                t = max(ready, starts[0] if len(starts) >= _KEEP else ready)
                i = bisect.bisect_right(ends, t)
                while i < len(starts) and starts[i] < t + duration:
                    t = max(t, ends[i])
                    i += 1
            if duration > 0:
                starts.insert(i, t)
                ends.insert(i, t + duration)
                if len(starts) > _KEEP:
                    del starts[0], ends[0]
            return t

    def locked(self):
        """True while an operation on this engine is really running."""
        return self.running > 0 or self.held > 0


# -- one device ---------------------------------------------------------------
class DeviceState:
    """What one device owns: memory, engines, its legacy null queue."""

    def __init__(self, device_id):
        self.id = device_id
        self.capacity = CAPACITY
        self.reserved = 0                 # bytes held by pools on the device
        self.lock = threading.Lock()
        self.compute = Engine("compute")
        self.h2d = Engine("H2D")
        copies = profile.properties.get("asyncEngineCount", 2)
        self.d2h = self.h2d if copies < 2 else Engine("D2H")
        # Queues that sync with legacy null. Changed without self.lock on
        # purpose: add, discard and list() of a set are each one C call,
        # atomic under the GIL; a queue being made has no work yet, so a
        # null-stream launch that misses it misses nothing (README.md).
        self.blocking_queues = set()
        self.loaded = set()               # kernels whose module is loaded
        self._null = None
        self._ptds = threading.local()    # this thread's per-thread stream

    @property
    def null_queue(self):
        if self._null is None:
            with self.lock:
                if self._null is None:
                    self._null = Queue(self, "null", legacy=True)
        return self._null

    def ptds_queue(self):
        """The calling host thread's per-thread default stream on this
        device (cudaStreamPerThread): made on first use, one per thread. It
        is an ordinary blocking stream: it synchronizes with the legacy null
        stream, not with other streams. It is destroyed when its thread
        ends (its worker first finishes the work queued on it)."""
        own = getattr(self._ptds, "owner", None)
        if own is None:
            own = self._ptds.owner = _PerThread(
                Queue(self, f"ptds-{threading.get_ident()}"))
        return own.queue

    def reserve(self, nbytes):
        """Take ``nbytes`` of device memory; False when it does not fit."""
        with self.lock:
            if self.reserved + nbytes > self.capacity:
                return False
            self.reserved += nbytes
            return True

    def release(self, nbytes):
        with self.lock:
            self.reserved -= nbytes

    def queues(self):
        return [q for q in list(_all_queues) if q.dev is self]

    def synchronize(self):
        """Wait for every queue of the device (cudaDeviceSynchronize)."""
        for q in self.queues():
            q.host_wait(q.last)

    def load_module(self, name):
        """The first launch of kernel ``name`` on this device loads its
        module: the host waits until the device has finished what it was
        running (a context synchronization, on the device clock), then for
        the load itself."""
        if name in self.loaded:
            return
        self.loaded.add(name)
        busy_until = max((q.last.end for q in self.queues()
                          if q.last is not None and q.last.end is not None),
                         default=0.0)
        sleep_until(max(clock(), busy_until) + profile.module_load_s)


class _PerThread:
    """Holds a thread's per-thread default queue; when the thread ends, its
    thread-local storage drops this holder and the queue is closed."""

    def __init__(self, queue):
        self.queue = queue
        weakref.finalize(self, queue.close)


_states = {}
_states_lock = threading.Lock()


def state(device_id):
    """The device's state; the first call creates its context (the host
    waits for that, as for CUDA's lazy start-up)."""
    st = _states.get(device_id)
    if st is None:
        with _states_lock:
            st = _states.get(device_id)
            if st is None:
                st = DeviceState(device_id)
                sleep_until(clock() + profile.context_create_s)
                _states[device_id] = st
    return st


def initialized(device_id):
    """True once the device has been used (the lazy start-up happened)."""
    return device_id in _states


# -- queues and their workers -------------------------------------------------
_IDLE_S = 1.0          # a worker with nothing to do for this long exits
_LAUNCH_BLOCKING = os.environ.get("CUDA_LAUNCH_BLOCKING", "0") == "1"
_all_queues = weakref.WeakSet()

KERNEL, COPY, HOST, MARK = "kernel", "copy", "host", "mark"


class Item:
    """One operation in a queue, and its times on the device clock."""

    __slots__ = ("q", "seq", "kind", "engine", "fn", "deps", "issued",
                 "latency", "work", "real", "start", "end")

    def __init__(self, q, kind, engine, fn, deps, latency, work, real):
        self.q, self.kind, self.engine, self.fn = q, kind, engine, fn
        self.deps = deps
        self.latency, self.work, self.real = latency, work, real
        self.issued = clock()
        self.seq = 0
        self.start = self.end = None

    def done(self):
        """Really finished, and past its modelled end on the device clock."""
        return (self.q.completed >= self.seq and self.end is not None
                and self.end <= clock())


class Capture:
    """One stream capture: the nodes recorded so far, in issue order (a
    topological order), shared by the origin stream and every stream that
    joined it by waiting on an event recorded in it (a fork)."""

    def __init__(self, origin):
        self.origin = origin
        self.nodes = []
        self.ids = set()            # id() of every node, to test membership
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
        self.ids.add(id(item))
        self.tails[q] = item
        return item

    def holds(self, item):
        return item is not None and id(item) in self.ids

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
        self.cv = threading.Condition(threading.Lock())
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
        if kind is None:
            kind = (MARK if engine is None else
                    KERNEL if engine is self.dev.compute else COPY)
        if cost is None:
            cost = ((profile.launch_s if kind == KERNEL else
                     profile.copy_latency_s if kind == COPY else 0.0), 0.0)
        item = Item(self, kind, engine, fn, deps, cost[0], cost[1], real)
        if issued is not None and issued > item.issued:
            item.issued = issued
        if self.capture is not None:
            return self.capture.add(self, item)
        if self.legacy:
            self._check_no_blocking_capture()
        legacy = self._legacy_deps()
        if legacy:
            item.deps = list(deps) + legacy
        if real and engine is not None:
            with engine.lock:
                engine.held += 1        # the engine is its until it has run
        else:
            self._book(item)
        with self.cv:
            if self.closed:
                raise RuntimeError(f"{self.name} stream has been destroyed")
            self.enqueued += 1
            item.seq = self.enqueued
            self.last = item
            if self.fatal is not None:      # lost: the next wait says so
                item.fn = item.deps = None
                item.start = item.end = item.issued
                self.completed = item.seq
                return item
            self.items.append(item)
            if self.thread is None:
                self.thread = threading.Thread(
                    target=self._work, name=f"cpudevice-{self.name}",
                    daemon=True)
                self.thread.start()
            elif self.idle:
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
                                 and item.engine.held):
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

    def pending(self):
        """The last item, while it has not finished (really, or on the
        device clock); else None."""
        last = self.last
        if last is None or (self.completed >= last.seq and
                            last.end is not None and last.end <= clock()):
            return None
        return last

    def _legacy_deps(self):
        dev = self.dev
        if self.legacy:
            return [last for last in (q.pending() for q in
                                      list(dev.blocking_queues))
                    if last is not None]
        if self.blocking and dev._null is not None:
            last = dev._null.pending()
            if last is not None:
                return [last]
        return []

    def check_not_capturing(self, what="synchronize"):
        if self.capture is not None:
            from .cuda import runtime
            self.capture.invalidate(what)
            raise runtime._error(
                runtime.errorStreamCaptureUnsupported,
                f"{what} waits for the host, which a stream under capture "
                "cannot do; end the capture first")

    def _check_no_blocking_capture(self):
        """Work on the legacy null stream while a blocking stream of its
        device captures would make it wait for the capture: CUDA refuses
        that (cudaErrorStreamCaptureImplicit) and invalidates the capture."""
        capturing = [q for q in list(self.dev.blocking_queues)
                     if q.capture is not None]
        if capturing:
            from .cuda import runtime
            for q in capturing:
                q.capture.invalidate("work on the legacy null stream")
            raise runtime._error(
                runtime.errorStreamCaptureImplicit,
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
        None for nothing queued yet) has really run and the device clock
        has passed its modelled end; raise a failure of the queue's work."""
        self.check_not_capturing()
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
        self._raise_errors()
        if item is not None and item.end is not None:
            sleep_until(item.end)

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
        if item is None:
            return True
        if isinstance(item, Item):
            return item.done()
        return self.completed >= item

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
                if item.engine is not None and item.engine.held:
                    item.engine.wait_free()
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
            # per item would hand the GIL back and forth for nothing.
            if item.seq >= min(self.awaited, default=item.seq + 1):
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
        did, on the device clock."""
        engine = item.engine
        t0 = clock()
        if engine is None:
            self._call(item.fn, None)
            return max(ready + item.latency + item.work + clock() - t0,
                       clock())
        try:
            self._call(item.fn, engine)
            t1 = clock()
            with engine.lock:
                begin = ready + (item.latency if item.kind == KERNEL
                                 else 0.0)
                if engine.ends:
                    begin = max(begin, engine.ends[-1])
                end = max(begin + max(item.work, t1 - t0), t1)
                engine.starts.append(begin)
                engine.ends.append(end)
                if len(engine.starts) > _KEEP:
                    del engine.starts[0], engine.ends[0]
        finally:
            self._release(item)
        return end

    @staticmethod
    def _release(item):
        """A real-time item has run (or never will): free its engine."""
        engine = item.engine
        if item.real and engine is not None:
            with engine.lock:
                engine.held -= 1
                engine.freed.notify_all()

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
