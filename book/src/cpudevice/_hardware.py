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
import bisect
import threading
import weakref

from . import _profile
from ._clock import (_running, api, clock, globaltimer_ns,  # noqa: F401
                     host_lag, host_now, host_sleep, host_wait_until,
                     sleep_until)
from ._fork import check_not_forked
from ._profile import (CAPACITY, DEFAULT_PROFILE, N_DEVICES,  # noqa: F401
                       Profile, _config, _parse_bytes, set_profile)
from ._queue import (COPY, HOST, KERNEL, MARK, Capture, Item,  # noqa: F401
                     Queue, WorkerError, _all_queues)


def __getattr__(name):
    # ``profile`` is rebound by `set_profile`: always the current one.
    if name == "profile":
        return _profile.profile
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Each created stream's queue by its handle (``Stream.ptr``), for the
#: runtime calls that take a handle (cudaMallocAsync, cudaMemPrefetchAsync).
streams = weakref.WeakValueDictionary()


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
        self.holds = set()      # issue numbers of real-time operations
                                # issued, not yet run
        self.issued = 0         # real-time operations ever issued

    def hold(self):
        """A real-time operation is issued: it holds the engine until it
        has run (`release`). Returns its issue number."""
        with self.lock:
            n = self.issued
            self.issued += 1
            self.holds.add(n)
            return n

    def release(self, n):
        with self.lock:
            self.holds.discard(n)
            self.freed.notify_all()

    def wait_free(self, before):
        """Wait (really) until no real-time operation issued before the
        caller's (``before``: `issued` when it was issued) holds the engine.
        One issued after it may be queued behind it: waiting for that one
        would never end."""
        with self.freed:
            self.freed.wait_for(
                lambda: not self.holds or min(self.holds) >= before)

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

    def append(self, ready, duration, not_before):
        """Book ``duration`` after the last booked interval and ``ready``,
        ending no earlier than ``not_before``; return its end. (For work
        whose length is known only once it has run: it held the engine.)"""
        with self.lock:
            begin = max(ready, self.ends[-1]) if self.ends else ready
            end = max(begin + duration, not_before)
            self.starts.append(begin)
            self.ends.append(end)
            if len(self.starts) > _KEEP:
                del self.starts[0], self.ends[0]
            return end

    def locked(self):
        """True while an operation on this engine is really running."""
        return self.running > 0 or bool(self.holds)


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
        copies = _profile.profile.properties.get("asyncEngineCount", 2)
        self.d2h = self.h2d if copies < 2 else Engine("D2H")
        # Queues that sync with legacy null. Changed without self.lock on
        # purpose: add, discard and list() of a set are each one C call,
        # atomic under the GIL; a queue being made has no work yet, so a
        # null-stream launch that misses it misses nothing (README.md).
        self.blocking_queues = set()
        self.loaded = set()               # kernels whose module is loaded
        self.sync_hooks = []              # called after each host wait
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
        check_not_forked()
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
        host_wait_until(busy_until)
        host_sleep(_profile.profile.module_load_s)


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
                host_sleep(_profile.profile.context_create_s)
                _states[device_id] = st
    return st


def initialized(device_id):
    """True once the device has been used (the lazy start-up happened)."""
    return device_id in _states

