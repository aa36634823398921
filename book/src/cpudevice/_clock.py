"""The clocks of the CPU device model: the device clock, and each host
thread's view of it.

The device clock is the host's ``time.perf_counter``. Events, the engines'
schedules and ``%globaltimer`` read it. See `host_now` for the host side.
"""
import threading
import time

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

