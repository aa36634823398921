"""Experiments measured for `calibrate.py` only, with every full run: no
effect reads them."""
import math
import time

from src import cp

from .experiment import experiment, sync
from .sizes import SIZES

CALIBRATION = ("issue_costs", "copy_duplex")   # with every full run

ISSUE_CALLS = 2000                  # calls per round of `issue_costs`


@experiment
def issue_costs():
    """The host's time to issue one call of each kind the model's profile
    charges (``host/issue_us``), for `calibrate.py`: an event's record on a
    stream (``Event.record``, as `EventTimer` records), a view (``x[1:]``,
    a call that queues no work), ``x + x`` (a launch) and ``x.sum()`` (a
    reduction's launch) on 1,000 float32, from an idle device. Each is the
    fastest of five rounds of `ISSUE_CALLS` calls, per call, less the same
    loop's time around a Python function that does nothing. On a GPU these
    are CuPy's host costs; on the model, its own Python (not the profile's
    issue times, which only its device clock counts)."""
    stream = cp.cuda.Stream(non_blocking=True)
    event = cp.cuda.Event()
    with stream:
        x = cp.zeros(1000, dtype=cp.float32)

    def nothing():
        return None

    def per_call(fn, rounds=5):
        fn()                                    # warm-up: compile, load
        best = math.inf
        for _ in range(rounds):
            stream.synchronize()                # from an idle device
            t = time.perf_counter()
            for _ in range(ISSUE_CALLS):
                fn()
            best = min(best, (time.perf_counter() - t) / ISSUE_CALLS)
        stream.synchronize()
        return best

    with stream:
        empty = per_call(nothing)
        out = {"event_record_s": per_call(lambda: event.record(stream)),
               "view_s": per_call(lambda: x[1:]),
               "launch_s": per_call(lambda: x + x),
               "reduction_s": per_call(x.sum)}
    return {k: max(v - empty, 0.0) for k, v in out.items()} | {
        "empty_loop_s": empty}


@experiment
def copy_duplex():
    """Is the link full duplex? An H2D copy of bw_large bytes from pinned
    memory, a D2H copy of as many into pinned memory, each alone on its
    stream, then both at once on two streams, between events (best of
    three, after a warm-up). The model gives each direction an engine and
    the link's full rate (``(h2d + d2h) / both`` is 2); a GPU's PCIe link
    may give less when both directions run at once. No effect reads it,
    and the profile has no entry for it: `calibrate.py` prints it."""
    from src import transfer
    from src.timing import EventTimer
    n = SIZES["bw_large"]
    up = transfer.host_buffer(n, pinned=True)
    down = transfer.host_buffer(n, pinned=True)
    dev_in, dev_out = cp.empty(n, cp.uint8), cp.empty(n, cp.uint8)
    s_in, s_out = (cp.cuda.Stream(non_blocking=True) for _ in range(2))
    out = {"h2d_s": transfer.time_copy(up, dev_in, "H2D", s_in, 3).event_s,
           "d2h_s": transfer.time_copy(down, dev_out, "D2H", s_out,
                                       3).event_s}
    both = []
    for _ in range(4):
        sync()
        timer = EventTimer(s_in)
        with timer:
            s_out.wait_event(s_in.record())     # both start together
            dev_in.set(up, stream=s_in)
            dev_out.get(stream=s_out, out=down, blocking=False)
            s_in.wait_event(s_out.record())     # the end waits for both
        both.append(timer.seconds)
    out["both_s"] = min(both[1:])               # the first warms up
    del up, down
    return out
