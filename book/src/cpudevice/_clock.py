"""The clocks of the CPU device model: the device clock, and each host
thread's view of it.

The **device clock** is the host's ``time.perf_counter``. Events, the
engines' schedules and ``%globaltimer`` read it.

Each **host thread** sees the device clock through its own view,
`host_now`: the time at which that thread issues work to the device, as a
GPU's host would. The model's own Python is slower than CuPy's (an addition
takes the model about 60 us to issue, CuPy about 10), and its real work is
slower than the device it models (a copy into device memory that the
profile says takes 5 ms is a memcpy of 40 ms on the CPU). Neither may leak
into device time, or a kernel issued right after a copy would start late
on the device clock, and two events around a small copy would time the
model's Python. So a thread's view runs behind the clock by a *lag*:

* a call into the model's API (`api`) costs the thread the profile's issue
  time for its kind (CuPy's, measured on the reference GPU's host), not its
  real duration: the rest of its real duration is added to the lag;
* a host wait (`Queue.host_wait`, a blocking copy, staging) costs the
  thread what the *model* says the wait takes: until the awaited work's
  modelled end, or nothing if that is already past. When the real work was
  slower, the wait really lasts longer, and the overshoot is added to the
  lag;
* everything else (the user's own Python and NumPy, ``time.sleep``) passes
  at the same rate on both.

The real clock is never bent: a host wait still returns only once the
work has really run and the thread's view has passed its modelled end, and
``time.perf_counter`` (and so ``%timeit``) reads the real durations, which
include the model's overheads. The times work is issued at, and so
everything events measure, follow the view; so do the book's host clocks
(`src.timing.host_clock`, which `Benchmark` and `MemoryMonitor` read, and
``cupyx.profiler.benchmark``'s ``cpu_times``), so that a host clock that
waits for device work agrees with the events, as on a GPU.
"""
import functools
import threading
import time

from . import _profile

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



# -- each host thread's view of the device clock ----------------------------
class _Host(threading.local):
    depth = 0       # > 0 inside a call into the model's API
    v = 0.0         # inside a call: the thread's view, advanced by the call
    lag = 0.0       # the device clock less the thread's view (outside one)


_host = _Host()


def host_now():
    """This host thread's view of the device clock: when work it issues now
    reaches the device (see the module's docstring)."""
    h = _host
    return h.v if h.depth else clock() - h.lag


def host_lag():
    """How far this thread's view runs behind the device clock, in seconds
    (at the start of the current API call, inside one)."""
    return _host.lag


def api(kind):
    """Decorate an entry point of the model's API: a call of ``kind``
    ("launch", "reduction", "graph", "copy", "event", "call") costs the calling
    thread's view of the device clock the profile's issue time for that
    kind, plus what it waits for on the device, not the model's real time;
    calls made inside it are part of it."""
    def wrap(fn):
        # The hot path of every call: the clock and the issue time are read
        # inline (``time.perf_counter`` looked up at each call, as `clock`
        # does, so that a patched clock is seen), no frame but this one.
        @functools.wraps(fn)
        def call(*args, **kwargs):
            h = _host
            if h.depth:
                return fn(*args, **kwargs)
            h.depth = 1
            h.v = (time.perf_counter() - h.lag +
                   _profile.profile.issue.get(kind, 0.0))
            try:
                return fn(*args, **kwargs)
            finally:
                h.depth = 0
                h.lag = time.perf_counter() - h.v
        return call
    return wrap


def host_wait_until(end, since=None, issuer_lag=None):
    """The calling thread has waited for work that ends at ``end`` on the
    device clock (its real wait for the real work is over): sleep, without
    spinning, until that end has passed, then count the wait as the model
    says it lasts. ``since``: the thread's view when the wait began
    (outside an API call; default, now). ``issuer_lag``: the lag of the
    thread that issued the work, when it issued it (`Item.lag`; default,
    this thread's): ``end`` is in that thread's view, so it has passed once
    the clock reads ``end + issuer_lag``. (Waiting until this thread's own
    view passes it instead would hold a thread whose lag is larger, after
    long real work, for the difference, on another thread's work.)"""
    h = _host
    if since is None:
        since = host_now()
    sleep_until(end + (h.lag if issuer_lag is None else issuer_lag))
    if h.depth:
        if end > h.v:
            h.v = end
        return
    h.lag = clock() - max(since, end)


def host_sleep(seconds):
    """The host itself works for ``seconds`` of modelled time (staging a
    pageable copy, creating a context, loading a module): sleep until that
    much has passed since the thread's view, then count exactly that."""
    h = _host
    start = host_now()
    sleep_until(start + seconds + h.lag)
    if h.depth:
        h.v += seconds
    else:
        h.lag = clock() - (start + seconds)
