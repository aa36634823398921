"""06, pinned memory: bandwidth, allocation, what `set` holds the host for,
and the 2x2 of pageable or pinned memory and blocking or not; with the
copy of 03's loop carry against one step on it."""
import functools

import numpy as np
from src import cp, cpx

from ..effect import DEVICE_ONLY, MIXED, Effect
from ..experiment import experiment
from ..sizes import SIZES


@experiment
def copy_and_add():
    """03/06: an H2D copy of the large loop carry from pinned memory
    (`transfer.time_copy`), and one ``x + x`` on it, each timed with events
    on one stream after a warm-up: start, queue the work, end, then wait
    (best of five)."""
    from src import transfer
    from src.timing import EventTimer
    n = SIZES["carry"]
    stream = cp.cuda.Stream(non_blocking=True)
    host = cpx.zeros_pinned(n, dtype=np.float32)
    with stream:
        dev = cp.zeros(n, dtype=cp.float32)
    copy = transfer.time_copy(host, dev, "H2D", stream, repeat=5)
    with stream:
        dev + dev                       # warm-up
        add_s = []
        for _ in range(5):
            timer = EventTimer(stream)
            with timer:
                dev + dev
            add_s.append(timer.seconds)
    return {"copy_s": copy.event_s, "add_s": min(add_s)}


@experiment
def allocation():
    """06: allocating and writing host memory, pageable against new pinned
    memory (`transfer.allocation_times`, best of three)."""
    from src import transfer
    t = transfer.allocation_times(SIZES["alloc"])
    return {"pageable_s": t["pageable"], "pinned_s": t["pinned, new"]}


@experiment
def bandwidth():
    """06: H2D copies timed with events (`transfer.time_copy`, best of
    five): the largest size from pageable and pinned memory, 1 KiB pinned."""
    from src import transfer
    large = SIZES["bw_large"]
    dev = cp.empty(large, dtype=cp.uint8)
    stream = cp.cuda.Stream(non_blocking=True)
    out = {}
    for pinned in (False, True):
        host = transfer.host_buffer(large, pinned)
        kind = "pin" if pinned else "page"
        out[f"large_{kind}_gbps"] = transfer.time_copy(
            host, dev, "H2D", stream).event_gbps
        if pinned:
            n = SIZES["bw_small"]
            out["small_pin_gbps"] = transfer.time_copy(
                host[:n], dev[:n], "H2D", stream).event_gbps
        del host
    return out


@experiment
def set_returns():
    """06: how long ``x.set(src, stream=)`` holds the host, and when the
    copy is done (`transfer.returns_and_done`), pageable and pinned."""
    from src import transfer
    stream = cp.cuda.Stream(non_blocking=True)
    m = SIZES["set_m"]
    pageable = np.random.default_rng(0).random(m, dtype=np.float32)
    pinned = cpx.empty_like_pinned(pageable)
    pinned[...] = pageable
    x = cp.empty(m, dtype=cp.float32)
    out = {}
    for name, src_ in (("pageable", pageable), ("pinned", pinned)):
        r, d = transfer.returns_and_done(
            lambda: x.set(src_, stream=stream), stream)
        out[f"{name}_returns_s"], out[f"{name}_done_s"] = r, d
    return out


@functools.cache
def _batch():
    """06: the 2x2 experiment's batch, model and host work."""
    rng = np.random.default_rng(0)
    pageable = rng.random(SIZES["batch_m"], dtype=np.float32)
    pinned = cpx.empty_like_pinned(pageable)
    pinned[...] = pageable
    next_batch = rng.random(SIZES["next_batch"], dtype=np.float32)
    scratch = np.empty_like(next_batch)

    def model(x):
        return cp.sqrt(x).sum()

    def host_work():
        np.sin(next_batch, out=scratch)
    return pageable, pinned, model, host_work


@experiment
def two_by_two():
    """06: copy, model, host work; pageable or pinned x blocking or not
    (`transfer.two_by_two`, medians of five)."""
    from src import transfer
    pageable, pinned, model, host_work = _batch()
    out = {}
    for memory, blocking, _, step in transfer.two_by_two(
            pageable, pinned, model, host_work, repeat=5):
        key = f"{memory}_{'b' if blocking else 'nb'}"
        out[f"blk_{key}_s"] = step.blocked_s
        out[f"tot_{key}_s"] = step.total_s
    return out


@experiment
def consume_order():
    """06: a pinned, non-blocking step consuming the result before or after
    the host work (`transfer.copy_then_compute`, medians of five)."""
    from src import transfer
    _, pinned, model, host_work = _batch()
    out = {}
    for name, first in (("consume_first", True), ("host_first", False)):
        step = transfer.copy_then_compute(pinned, model, host_work,
                                          blocking=False, consume_first=first)
        out[f"{name}_total_s"] = step.total_s
    return out


# what several effects below share
BATCH = ("batch_m", "next_batch")
NOTHING_HIDDEN = ("the step's real copy and model (NumPy, about 0.1 s) "
                  "outlast their modelled time and share the host's cores "
                  "with the host work, so nothing is hidden by overlap")
EFFECTS = [
    Effect("pinned_over_pageable_bw",
           "H2D bandwidth, pinned over pageable (largest copy)",
           DEVICE_ONLY, "bandwidth", "large_pin_gbps / large_page_gbps",
           ("06_1_bandwidth/bw_large_pin", "06_1_bandwidth/bw_large_page"),
           "bw_large_pin / bw_large_page",
           sizes=("bw_large",)),
    Effect("large_over_small_bw",
           "pinned H2D bandwidth, largest copy over 1 KiB",
           DEVICE_ONLY, "bandwidth", "large_pin_gbps / small_pin_gbps",
           ("06_1_bandwidth/bw_large_pin", "06_1_bandwidth/bw_small"),
           "bw_large_pin / bw_small",
           sizes=("bw_large", "bw_small")),
    Effect("copy_over_add",
           "H2D copy of an array over one x + x on it",
           DEVICE_ONLY, "copy_and_add", "copy_s / add_s",
           ("03_2_costs/big_mib", "06_1_bandwidth/bw_large_pin",
            "03_2_costs/big_eager_us"),
           "(big_mib * 2**20 / (bw_large_pin * 1e9)) / (big_eager_us * 1e-6)",
           sizes=("carry",)),
    Effect("alloc_pinned_over_pageable",
           "allocating 64 MiB: new pinned over pageable",
           MIXED, "allocation", "pinned_s / pageable_s",
           ("06_1_bandwidth/alloc_pin_ms", "06_1_bandwidth/alloc_page_ms"),
           "alloc_pin_ms / alloc_page_ms",
           "the model pins with mlock or touches pages, real host work "
           "without a driver's registration",
           sizes=("alloc",)),
    Effect("set_pinned_returns_over_done",
           "x.set from pinned memory: call returns over copy done",
           MIXED, "set_returns", "pinned_returns_s / pinned_done_s",
           ("06_2_async/set_pinned_returns",
            "06_2_async/set_pinned_done"),
           "set_pinned_returns / set_pinned_done",
           "queueing a copy is real Python time; a small modelled copy can "
           "finish about as fast",
           sizes=("set_m",)),
    Effect("set_pageable_returns_over_done",
           "x.set from pageable memory: call returns over copy done",
           MIXED, "set_returns", "pageable_returns_s / pageable_done_s",
           ("06_2_async/set_pageable_returns",
            "06_2_async/set_pageable_done"),
           "set_pageable_returns / set_pageable_done",
           "a pageable copy must hold the host for the staging and the "
           "copy; a model that stages without the copy returns early",
           sizes=("set_m",)),
    Effect("pageable_nb_over_b_blocked",
           "host blocked, pageable: non-blocking over blocking",
           MIXED, "two_by_two", "blk_pageable_nb_s / blk_pageable_b_s",
           ("06_2_async/blk_pageable_nb",
            "06_2_async/blk_pageable_b"),
           "blk_pageable_nb / blk_pageable_b",
           "the blocking call waits for the real memcpy into device memory "
           "(differently aligned buffers), slower than its modelled staging "
           "and copy; the non-blocking one only for its staging",
           sizes=BATCH),
    Effect("both_over_neither_blocked",
           "host blocked: pinned non-blocking over pageable blocking",
           MIXED, "two_by_two", "blk_pinned_nb_s / blk_pageable_b_s",
           ("06_2_async/blk_pinned_nb",
            "06_2_async/blk_pageable_b"),
           "blk_pinned_nb / blk_pageable_b",
           "queueing is real Python time on the host; only the copy is "
           "modelled",
           sizes=BATCH),
    Effect("both_over_neither_total",
           "step total: pinned non-blocking over pageable blocking",
           MIXED, "two_by_two", "tot_pinned_nb_s / tot_pageable_b_s",
           ("06_2_async/tot_pinned_nb",
            "06_2_async/tot_pageable_b"),
           "tot_pinned_nb / tot_pageable_b",
           NOTHING_HIDDEN,
           sizes=BATCH),
    Effect("host_first_over_consume_first",
           "step total: host work first over consuming first",
           MIXED, "consume_order",
           "host_first_total_s / consume_first_total_s",
           ("06_2_async/later_total", "06_2_async/consume_total"),
           "later_total / consume_total",
           NOTHING_HIDDEN,
           sizes=BATCH),
]
