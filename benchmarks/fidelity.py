"""The effects the book teaches, measured here, beside a real GPU's.

    python benchmarks/fidelity.py [--json OUT.json] [--markdown PAGE.md]
                                  [--reference PATH] [--only KEY ...]

Each *effect* is a unitless ratio that a lesson measures (pinned over
pageable bandwidth, a graph's speedup over eager launches, ...). This script
measures it on whichever backend `src` picks, the way the lesson does and
with the lesson's helpers (`src.transfer`, `src.timeline`, `src.pipeline`,
`src.loops`, `src.timing`, `src.startup`), at the same sizes on either
backend. The sizes follow one rule: **the size the GPU lesson used (the size
the H100 reference was measured at) where the model can afford it, else the
largest the model can afford**. The model does every operation's real work
on the CPU, so "afford" means that an experiment's real work fits in about
ten seconds on 2 idle cores and its device arrays fit the model's 1 GiB
device; a size is never chosen to make an effect agree. `SIZE_SPECS` lists
each size here and the GPU lesson's; every row of the output says what its
effect was measured at, the reference's size, and why they differ where
they do (`SIZE_WHY`).

Device-only effects are read on the device clock, as a GPU benchmark reads
them: events on a stream after a warm-up, recorded around work that is only
queued (start, queue the work, end, then wait), so that no host wait sits
between the two events. The exception is a copy from pageable memory, which
holds the host between its events on a GPU too.

Beside each value, the GPU reference:

* by default, ``book/reference/nvidia-h100.json``: what the lessons glued on
  an NVIDIA H100, combined by the formula each effect states. Those values
  were taken at the lessons' *GPU* sizes, until a GPU runs fidelity.py
  itself;
* with ``--reference PATH``, that file instead: a lessons reference of the
  same form, or the ``--json`` output of fidelity.py run on a GPU, whose
  values are then compared size for size.

Run on a GPU, the live values are that GPU's own, and ``--json`` saves them
to become the reference.

Each effect has a class:

* **device-only**: measured with CUDA events, or dominated by device time
  (copy against compute, pinned against pageable bandwidth, overlap on a
  timeline, fused against eager at a large size). It *agrees* when it is
  within a factor of `FACTOR` (2) of the reference, either way; for a
  speedup (``gain=True``) the factor applies to its gain, the ratio less 1,
  so a reference of 1.2 needs 1.1 to 1.4, not merely anything from 0.6.
* **mixed** host/device: host clocks around device work, first use in a
  fresh process, a host held by a copy. It *agrees* when it points the
  reference's way: both above 1, both below 1, or both "about 1", within a
  factor of `BAND` (1.3) of 1. One that does not is *flagged*, with the
  reason written beside the effect below.

Run in full (no ``--only``), it also runs `issue_costs`, which no effect
reads: the host's time to issue an event's record, a view, a launch and a
reduction's launch, from which `calibrate.py` solves the profile's issue
costs on a GPU's run (the page shows them beside the profile's); and
`copy_duplex`, copies in both directions at once against each alone.

Nothing here is asserted: ``tests/test_fidelity.py`` checks the table's
structure and the verdicts' logic, not the numbers.
"""
import argparse
import ast
import datetime
import functools
import io
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
sys.path.insert(0, str(BOOK))
from src import BACKEND, cp, cpx, device_names  # noqa: E402
from src import reference as refs  # noqa: E402

DEVICE_ONLY, MIXED = "device-only", "mixed"
FACTOR = 2.0        # device-only: agrees within this factor of the reference
BAND = 1.3          # mixed: "about 1" within this factor of 1
AGREES, DIFFERS, FLAGGED = "agrees", "differs", "flagged"
NO_REFERENCE, NOT_MEASURED = "no reference", "not measured"
DEFAULT_REFERENCE = refs.reference_path()

# Sizes. Each effect is measured at the same size on either backend, chosen
# by one rule: the size the GPU lesson used (``pick(gpu=...)``, the size the
# H100 reference was measured at) if the model can afford it, else the
# largest it can afford. The model does every operation's real work on the
# CPU, so "afford" means: the experiment's real work fits in about ten
# seconds on 2 idle cores, and its device arrays fit the model's default
# device memory (BOOK_CPU_DEVICE_MEMORY, 1 GiB). Sizes are never chosen to
# make an effect agree. Where a size differs from the GPU lesson's, the
# effect's row says so, with the reason below.
MIB = 2**20
# name: (size used here, the GPU lesson's size, unit)
SIZE_SPECS = {
    "trip_small": (2**10, 2**10, "bytes"),              # 01: sizes[0]
    "trip_large": (2**28, 2**28, "bytes"),              # 01: sizes[-1]
    "dot_n": (4000, 4000, "matrix"),                    # 04: n
    "add_n": (2**17, 2**22, "float32"),                 # 04: v
    "adds": (10000, 10000, "additions"),                    # 04: counts[-1]
    "overlap_n": (2**24, 2**26, "float64"),             # 04: z
    "small": (1000, 1000, "float32"),                   # 03: small
    "steps": (1024, 1024, "steps"),                     # 03: n_steps
    "small_size": (4**5, 4**5, "float32"),              # 03: sizes[0]
    "big_size": (4**12, 4**13, "float32"),              # 03: sizes[-1]
    "size_trips": (32, 32, "steps"),                    # 03: size_trips
    "carry": (4**13, 4**13, "float32"),                 # 03/06: big_size
    "chunk": (4 * 1024 * 256, 4 * 1024 * 256, "float32"),   # 05: chunk
    "n_streams": (4, 4, "streams"),                     # 05: demo streams
    "kernel_n": (32 * 2**20, 32 * 2**20, "float32"),    # 05: d_big
    "energy_n": (2**27, 2**27, "float32"),              # 05: n_x
    "energy_chunk": (2**20, 2**20, "float32"),          # 05: per chunk
    "alloc": (64 * MIB, 64 * MIB, "bytes"),             # 06: alloc_big
    "bw_small": (2**10, 2**10, "bytes"),                # 06: sizes[0]
    "bw_large": (256 * MIB, 256 * MIB, "bytes"),        # 06: largest
    "set_m": (2**26, 2**26, "float32"),                 # 06: m
    "batch_m": (2**26, 2**26, "float32"),               # 06: m2
    "next_batch": (2**22, 2**22, "float32"),            # 06: next_batch
}
# Why a size is smaller than the GPU lesson's (the rule's "else").
SIZE_WHY = {
    "add_n": "60,000 additions of 16 MiB would take minutes of real CPU "
             "work",
    "overlap_n": "64 Mi float64 and its temporaries do not fit the model's "
                 "1 GiB device",
    "big_size": "a 256 MiB carry, its copy and each step's result do not "
                "fit the model's 1 GiB device, and the four loops' real "
                "work there is about a minute on 2 cores",
}
SIZES = {name: used for name, (used, _, _) in SIZE_SPECS.items()}
GPU_SIZES = {name: gpu for name, (_, gpu, _) in SIZE_SPECS.items()}


SMALLER = "smaller than the GPU's: "


def size_label(name, value):
    """``value`` of size ``name`` in words: "256 MiB", "16 Mi float32"."""
    unit = SIZE_SPECS[name][2]

    def amount(n):
        for step, suffix in ((2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki")):
            if n >= step and n % step == 0:
                return f"{n // step} {suffix}"
        return f"{n:,}"
    if unit == "bytes":
        return amount(value) + "B" if value >= 2**10 else f"{value} B"
    if unit == "matrix":
        return f"{value} x {value} float64"
    if unit in ("streams", "steps", "additions"):
        return f"{value:,} {unit}"
    return f"{amount(value)} {unit}".replace("  ", " ")


def sizes_of(names):
    """``(here, gpu, note)``: the sizes ``names`` as text, here and in the
    GPU lesson, and why they differ (empty when they do not)."""
    here = ", ".join(size_label(n, SIZES[n]) for n in names) or "-"
    gpu = ", ".join(size_label(n, GPU_SIZES[n]) for n in names) or "-"
    why = [SMALLER + SIZE_WHY[n] for n in names
           if SIZES[n] != GPU_SIZES[n]]
    return here, gpu, "; ".join(why)


def free_pools():
    """Give back the memory an experiment's pools kept (the model's device
    is 1 GiB, and the next experiment's arrays must fit)."""
    import gc
    gc.collect()
    sync()
    cp.get_default_memory_pool().free_all_blocks()
    cp.get_default_pinned_memory_pool().free_all_blocks()


def sync():
    cp.cuda.Device().synchronize()


# -- experiments: each runs once and returns its raw numbers ------------------
EXPERIMENTS = {}


def experiment(fn):
    """Register ``fn() -> {name: number}``, run at most once per process."""
    cached = functools.cache(fn)
    EXPERIMENTS[fn.__name__] = cached
    return cached


@experiment
def first_use():
    """01: ten small operations in fresh processes (`in_fresh_processes`)."""
    from src.startup import in_fresh_processes
    runs = in_fresh_processes(runs=3, n_ops=10)
    op = np.array([r["op_s"] for r in runs])
    return {"first_s": float(np.median(op[:, 0])),
            "later_s": float(np.median(op[:, 1:]))}


@experiment
def round_trip():
    """01: a host round trip (host clock) against a copy on the device
    (events), with `cpx.profiler.benchmark`, smallest and largest size."""
    def trip(h):
        return cp.asnumpy(cp.asarray(h))

    out = {}
    for name in ("trip_small", "trip_large"):
        nbytes = SIZES[name]
        h = np.ones(nbytes // 8)
        d = cp.asarray(h)
        b = cpx.profiler.benchmark(trip, (h,), n_repeat=10, n_warmup=2)
        out[f"{name}_s"] = float(np.median(b.cpu_times))
        b = cpx.profiler.benchmark(d.copy, (), n_repeat=10, n_warmup=2)
        out[f"{name}_device_s"] = float(np.median(b.gpu_times[0]))
        out[f"{name}_bytes"] = nbytes
    return out


def _dot_sum(x):
    return cp.dot(x, x).sum()


@functools.cache
def _matrix():
    cp.random.seed(0)
    x = cp.random.normal(size=(SIZES["dot_n"], SIZES["dot_n"]))
    _dot_sum(x)                         # warm-up: libraries load
    sync()
    return x


@experiment
def queue_print():
    """04: queue dot(x, x).sum(), then print it (host clock); and its device
    time between events (`EventTimer`). Medians of five."""
    from src.timing import Benchmark, EventTimer
    x = _matrix()
    queued, printed, device = [], [], []
    for _ in range(5):
        sync()
        with Benchmark() as q:
            y = _dot_sum(x)
        with Benchmark() as p:
            print(y, file=io.StringIO())
        queued.append(q.seconds)
        printed.append(p.seconds)
        sync()
        with EventTimer() as timer:
            y = _dot_sum(x)
        device.append(timer.seconds)        # waits after the end event
    return {"queue_s": statistics.median(queued),
            "print_s": statistics.median(printed),
            "device_s": statistics.median(device)}


@experiment
def wait_each():
    """04: y = y + 1, ``adds`` times, queued with one wait or waiting after
    each (`Benchmark(sync=True)`), three interleaved repeats, medians."""
    from src.timing import Benchmark
    stream = cp.cuda.get_current_stream()
    v = cp.zeros(SIZES["add_n"], dtype=cp.float32)
    n = SIZES["adds"]

    def queue_all():
        y = v
        for _ in range(n):
            y = y + 1
        stream.synchronize()

    def wait_after_each():
        y = v
        for _ in range(n):
            y = y + 1
            stream.synchronize()

    times = {"queue_all": [], "wait_each": []}
    for _ in range(3):
        for name, fn in (("queue_all", queue_all),
                         ("wait_each", wait_after_each)):
            with Benchmark(sync=True) as b:
                fn()
            times[name].append(b.seconds)
    return {f"{k}_s": statistics.median(t) for k, t in times.items()}


_LAUNCH_CHILD = """
import json, time
from src import cp
x = cp.random.normal(size=({n}, {n}))
y = cp.dot(x, x).sum()
cp.cuda.Device().synchronize()
t = time.perf_counter()
y = cp.dot(x, x).sum()
launch_s = time.perf_counter() - t
done = cp.cuda.get_current_stream().done
print(json.dumps({{"done": done, "launch_s": launch_s}}))
"""


@experiment
def launch_blocking():
    """04: launching dot(x, x).sum() in a fresh process with
    CUDA_LAUNCH_BLOCKING=0 and =1 (fastest of two processes each)."""
    code = _LAUNCH_CHILD.format(n=SIZES["dot_n"])
    out = {}
    for flag, name in (("0", "async_s"), ("1", "blocking_s")):
        env = dict(os.environ, CUDA_LAUNCH_BLOCKING=flag)
        best = math.inf
        for _ in range(2):
            done = subprocess.run([sys.executable, "-c", code], env=env,
                                  cwd=BOOK, capture_output=True, text=True,
                                  check=True, timeout=300)
            best = min(best, json.loads(done.stdout.strip().splitlines()[-1])
                       ["launch_s"])
        out[name] = best
    return out


@experiment
def host_beside_device():
    """04: host work (a NumPy sort as long as the device work) after the
    first wait or before it; medians of five interleaved repeats."""
    from src.timing import Benchmark
    z = cp.random.random(SIZES["overlap_n"])

    def launch():
        return cp.sqrt(z * z + 1).sum()

    rng = np.random.default_rng(0)
    probe = rng.random(2**18)
    launch()
    with Benchmark(sync=True) as device_clock:
        launch()
    with Benchmark() as host_clock:
        np.sort(probe)
    h = rng.random(max(2**12, int(2**18 * device_clock.seconds
                                   / host_clock.seconds)))

    def wait_then_host():
        total = float(launch())
        np.sort(h)
        return total

    def host_then_wait():
        s = launch()
        np.sort(h)
        return float(s)

    orders = {"wait_first": wait_then_host, "host_first": host_then_wait}
    times = {name: [] for name in orders}
    for _ in range(5):
        for name, fn in orders.items():
            with Benchmark(sync=True) as b:
                fn()
            times[name].append(b.seconds)
    return {f"{k}_s": statistics.median(t) for k, t in times.items()}


@experiment
def loops():
    """03: seconds per step of `fori_loop`. On 1,000 floats and at the
    smallest size (mixed effects), as the lesson times them: host clock,
    fastest of nine calls from an idle device. At the large size (device-only
    effects), on the device clock: after a warm-up call, events on the
    calling stream around one call (start, queue the loop, end, then wait),
    fastest of two."""
    from src.loops import DOUBLE, fori_loop
    from src.timing import Benchmark, EventTimer

    def seconds(fn, repeat=9):
        fn()
        times = []
        for _ in range(repeat):
            with Benchmark(sync=True) as clock:
                fn()
            times.append(clock.seconds)
        return min(times)

    def device_seconds(fn, repeat=2):
        fn()                                # warm-up: loads, captures
        sync()
        times = []
        for _ in range(repeat):
            timer = EventTimer()            # on the current stream
            with timer:
                fn()
            times.append(timer.seconds)     # waits, after the end event
        return min(times)

    def per_step(strategy, body, x, n, clock=seconds):
        return clock(lambda: fori_loop(0, n, body, x,
                                       strategy=strategy)) / n

    def double_in_place(_, x):
        return cp.add(x, x, out=x)

    small = cp.zeros(SIZES["small"], dtype=cp.float32)
    out = {f"{s}_s": per_step(s, DOUBLE, small, SIZES["steps"])
           for s in ("eager", "graph", "fused")}
    trips = SIZES["size_trips"]
    x = cp.zeros(SIZES["small_size"], dtype=cp.float32)
    out["small_size_eager_s"] = per_step("eager", DOUBLE, x, trips)
    out["small_size_fused_s"] = per_step("fused", DOUBLE, x, trips)
    big = cp.zeros(SIZES["big_size"], dtype=cp.float32)
    for name, strategy, body in (("eager", "eager", DOUBLE),
                                 ("fused", "fused", DOUBLE),
                                 ("graph", "graph", DOUBLE),
                                 ("graph_in_place", "graph",
                                  double_in_place)):
        out[f"big_size_{name}_s"] = per_step(strategy, body, big, trips,
                                             device_seconds)
    return out


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
def default_stream():
    """05: how long the host waits for an event on the legacy default stream
    while a blocking or a non-blocking stream runs a kernel (medians of
    three)."""
    from src.kernels import launch_overlap
    from src.timing import Benchmark
    d_big = cp.zeros(SIZES["kernel_n"], dtype=cp.float32)
    launch_overlap(d_big, 0, d_big.size)           # warm-up: load it
    sync()

    def host_wait(stream):
        sync()
        launch_overlap(d_big, 0, d_big.size, stream=stream)
        with Benchmark() as waited:
            cp.cuda.Stream.null.record().synchronize()
        stream.synchronize()
        return waited.seconds

    blocking, non_blocking = [], []
    for _ in range(3):
        blocking.append(host_wait(cp.cuda.Stream()))
        non_blocking.append(host_wait(cp.cuda.Stream(non_blocking=True)))
    return {"blocking_s": statistics.median(blocking),
            "non_blocking_s": statistics.median(non_blocking)}


@experiment
def overlap_demo():
    """05: NVIDIA's overlap demo, sequential, V1 and V2, on a `Timeline`;
    fastest of nine runs of each (after one warm-up round), as
    the lesson keeps."""
    from src import pipeline, timeline
    from src.timeline import Timeline
    chunk, n_streams = SIZES["chunk"], SIZES["n_streams"]
    n = chunk * n_streams
    a = cpx.zeros_pinned(n, dtype=np.float32)
    d_a = cp.empty(n, dtype=cp.float32)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]

    def run(version):
        a[:] = 0
        if version == "sequential":
            tl = Timeline([cp.cuda.Stream.null])
            pipeline.sequential(pipeline.overlap_stages(a, d_a, 1),
                                timeline=tl)
            return tl.ops()
        return pipeline.measure(pipeline.overlap_stages(a, d_a, n_streams),
                                n_streams, streams, version)

    versions = ("sequential", "v1", "v2")
    runs = {v: [] for v in versions}
    for repeat in range(10):
        for v in versions:
            ops = run(v)
            if repeat > 0:
                runs[v].append(ops)
    demo = {v: min(runs[v], key=timeline.makespan) for v in versions}
    out = {f"{v}_ms": timeline.makespan(demo[v]) for v in versions}
    seq = demo["sequential"]
    out["seq_copies_ms"] = (timeline.busy(seq, "H2D")
                            + timeline.busy(seq, "D2H"))
    out["seq_kernel_ms"] = timeline.busy(seq, "kernel")
    one_engine = {"H2D": "copy engine", "D2H": "copy engine",
                  "kernel": "compute engine"}
    for v in ("v1", "v2"):
        out[f"one_engine_{v}_ms"] = timeline.makespan(
            timeline.replay(demo[v], one_engine))
    return out


@experiment
def energy():
    """05: MindSpore's chunked energy in chunks of 2**20 values on one and
    two streams, on a `Timeline` (events); fastest of three runs each after
    one warm-up round (the lesson keeps ten at its CPU size; at the GPU's
    size each round is 2 x 512 MiB of real work)."""
    from src import pipeline, timeline
    n_x = SIZES["energy_n"]
    n_chunks = n_x // SIZES["energy_chunk"]
    x = cpx.empty_pinned(n_x, dtype=np.float32)
    np.random.default_rng(0).random(dtype=np.float32, out=x)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    built = {n_s: pipeline.energy_stages(x, 1.0, 0.5, n_chunks, n_s)[0]
             for n_s in (1, 2)}
    fastest = {}
    for repeat in range(4):
        for n_s, stages in built.items():
            ops = pipeline.measure(stages, n_chunks, streams[:n_s])
            if repeat > 0 and (n_s not in fastest or timeline.makespan(ops)
                               < timeline.makespan(fastest[n_s])):
                fastest[n_s] = ops
    one = fastest[1]
    return {"one_ms": timeline.makespan(one),
            "two_ms": timeline.makespan(fastest[2]),
            "copy_ms": timeline.busy(one, "H2D"),
            "compute_ms": timeline.busy(one, "kernel")}


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


# -- measured for calibrate.py only: no effect reads them -------------------
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


# -- effects ------------------------------------------------------------------
@dataclass(frozen=True)
class Effect:
    """One effect: a ratio measured live and computed from the reference."""

    key: str
    title: str          # what the ratio compares, in a few words
    cls: str            # DEVICE_ONLY or MIXED
    experiment: str     # the function in EXPERIMENTS that measures it
    live: str           # expression over that experiment's numbers
    refs: tuple         # "lesson/key" of every reference value it uses
    formula: str        # expression over those keys (the part after "/")
    reason: str = ""    # mixed: why the model may point the other way
    gain: bool = False  # device-only speedup: judge the ratio less 1

    @property
    def lesson(self):
        return self.refs[0].split("/")[0]


EFFECTS = [
    # ---- device-only -------------------------------------------------------
    Effect("pinned_over_pageable_bw",
           "H2D bandwidth, pinned over pageable (largest copy)",
           DEVICE_ONLY, "bandwidth", "large_pin_gbps / large_page_gbps",
           ("06_pinned_memory/bw_large_pin", "06_pinned_memory/bw_large_page"),
           "bw_large_pin / bw_large_page"),
    Effect("large_over_small_bw",
           "pinned H2D bandwidth, largest copy over 1 KiB",
           DEVICE_ONLY, "bandwidth", "large_pin_gbps / small_pin_gbps",
           ("06_pinned_memory/bw_large_pin", "06_pinned_memory/bw_small"),
           "bw_large_pin / bw_small"),
    Effect("copy_over_add",
           "H2D copy of an array over one x + x on it",
           DEVICE_ONLY, "copy_and_add", "copy_s / add_s",
           ("03_fori_loop/big_mib", "06_pinned_memory/bw_large_pin",
            "03_fori_loop/big_eager_us"),
           "(big_mib * 2**20 / (bw_large_pin * 1e9)) / (big_eager_us * 1e-6)"),
    Effect("demo_copies_over_kernel",
           "overlap demo, sequential: copies over kernel",
           DEVICE_ONLY, "overlap_demo", "seq_copies_ms / seq_kernel_ms",
           ("05_streams/demo_copies_seq_ms", "05_streams/demo_kernel_seq_ms"),
           "demo_copies_seq_ms / demo_kernel_seq_ms"),
    Effect("demo_v1_speedup",
           "overlap demo: sequential over async V1",
           DEVICE_ONLY, "overlap_demo", "sequential_ms / v1_ms",
           ("05_streams/demo_v1_speedup",), "demo_v1_speedup",
           gain=True),
    Effect("demo_v2_speedup",
           "overlap demo: sequential over async V2",
           DEVICE_ONLY, "overlap_demo", "sequential_ms / v2_ms",
           ("05_streams/demo_v2_speedup",), "demo_v2_speedup",
           gain=True),
    Effect("one_copy_engine_v1_over_v2",
           "overlap demo replayed on one copy engine: V1 over V2",
           DEVICE_ONLY, "overlap_demo", "one_engine_v1_ms / one_engine_v2_ms",
           ("05_streams/one_engine_v1_ms", "05_streams/one_engine_v2_ms"),
           "one_engine_v1_ms / one_engine_v2_ms",
           gain=True),
    Effect("energy_bound",
           "chunked energy, one stream: (copy + compute) / max",
           DEVICE_ONLY, "energy",
           "(copy_ms + compute_ms) / max(copy_ms, compute_ms)",
           ("05_streams/energy_bound",), "energy_bound",
           gain=True),
    Effect("energy_two_streams",
           "chunked energy: one stream over two",
           DEVICE_ONLY, "energy", "one_ms / two_ms",
           ("05_streams/speedup_2",), "speedup_2",
           gain=True),
    Effect("big_eager_over_fused",
           "loop of x + x at the large size: eager over fused",
           DEVICE_ONLY, "loops", "big_size_eager_s / big_size_fused_s",
           ("03_fori_loop/big_eager_over_fused",), "big_eager_over_fused"),
    Effect("graph_copy_cost",
           "graph at the large size: pure body over in place",
           DEVICE_ONLY, "loops",
           "big_size_graph_s / big_size_graph_in_place_s",
           ("03_fori_loop/copy_cost",), "copy_cost",
           gain=True),
    # ---- mixed host/device --------------------------------------------------
    Effect("first_over_later",
           "first operation of a process over a later one",
           MIXED, "first_use", "first_s / later_s",
           ("01_devices/first_ratio",), "first_ratio",
           "the model has no driver context or kernel compilation to pay "
           "for, so its first use can drown in a busy host's noise"),
    Effect("round_trip_over_device_copy",
           "host round trip over a copy on the device (largest size)",
           MIXED, "round_trip", "trip_large_s / trip_large_device_s",
           ("01_devices/trip_vs_device",), "trip_vs_device",
           "the round trip is real host time: two staged copies by the "
           "CPU, however fast the modelled link is"),
    Effect("small_trip_over_its_bytes",
           "1 KiB round trip over its bytes at the large-copy rate",
           MIXED, "round_trip",
           "trip_small_s * trip_large_bytes"
           " / (trip_small_bytes * trip_large_s)",
           ("01_devices/trip_small_us", "01_devices/small_bytes_us"),
           "trip_small_us / small_bytes_us",
           "a small round trip is Python and thread hand-offs on the host, "
           "which the model does not scale"),
    Effect("print_over_queue",
           "print(y) over queueing dot(x, x).sum()",
           MIXED, "queue_print", "print_s / queue_s",
           ("04_async/print_ms", "04_async/queue_ms"),
           "print_ms / queue_ms",
           "print waits for the real product on the CPU, which can take "
           "longer or shorter than the modelled one"),
    Effect("device_over_queue",
           "dot(x, x).sum(): device time (events) over queueing it",
           MIXED, "queue_print", "device_s / queue_s",
           ("04_async/queue_ratio",), "queue_ratio",
           "the queueing is the model's real Python, several times "
           "CuPy's; a product small enough for the modelled device to "
           "finish in that time would point the other way"),
    Effect("wait_each_over_queue_all",
           "10,000 additions: waiting after each over waiting once",
           MIXED, "wait_each", "wait_each_s / queue_all_s",
           ("04_async/wait_ratio",), "wait_ratio",
           "a wait's round trip is a thread wake-up on the model, which a "
           "busy 2-core host can make long or short"),
    Effect("launch_blocking_over_async",
           "launch with CUDA_LAUNCH_BLOCKING=1 over =0",
           MIXED, "launch_blocking", "blocking_s / async_s",
           ("04_async/launch_blocking_ms", "04_async/launch_async_ms"),
           "launch_blocking_ms / launch_async_ms",
           "a blocking launch waits for the CPU's real product as well as "
           "the modelled one"),
    Effect("wait_first_over_host_first",
           "host work after the first wait over before it",
           MIXED, "host_beside_device", "wait_first_s / host_first_s",
           ("04_async/wrong_ms", "04_async/right_ms"),
           "wrong_ms / right_ms",
           "the device work's real NumPy time (over 100 ms; modelled: under "
           "1 ms) sets the host work's length and shares the host's cores "
           "with it, so the two compete instead of overlapping"),
    Effect("blocking_over_non_blocking_stream",
           "host wait on the default stream: blocking over non-blocking",
           MIXED, "default_stream", "blocking_s / non_blocking_s",
           ("05_streams/blocking_ms", "05_streams/non_blocking_ms"),
           "blocking_ms / non_blocking_ms",
           "the wait beside a non-blocking stream is a thread hand-off, "
           "slow on a loaded host"),
    Effect("eager_over_fused_small",
           "loop of x + x on 1,000 floats: eager over fused, per step",
           MIXED, "loops", "eager_s / fused_s",
           ("03_fori_loop/fused_speedup",), "fused_speedup",
           "eager steps are real Python launches; the fused loop's device "
           "time is modelled"),
    Effect("eager_over_graph_small",
           "loop of x + x on 1,000 floats: eager over graph, per step",
           MIXED, "loops", "eager_s / graph_s",
           ("03_fori_loop/graph_speedup",), "graph_speedup",
           "a replay is one queue item on the model, but its kernels still "
           "run one by one on a worker thread"),
    Effect("eager_over_fused_smallest",
           "loop of x + x at the smallest size: eager over fused",
           MIXED, "loops", "small_size_eager_s / small_size_fused_s",
           ("03_fori_loop/small_eager_over_fused",), "small_eager_over_fused",
           "eager steps are real Python launches; the fused loop's device "
           "time is modelled"),
    Effect("alloc_pinned_over_pageable",
           "allocating 64 MiB: new pinned over pageable",
           MIXED, "allocation", "pinned_s / pageable_s",
           ("06_pinned_memory/alloc_pin_ms", "06_pinned_memory/alloc_page_ms"),
           "alloc_pin_ms / alloc_page_ms",
           "the model pins with mlock or touches pages, real host work "
           "without a driver's registration"),
    Effect("set_pinned_returns_over_done",
           "x.set from pinned memory: call returns over copy done",
           MIXED, "set_returns", "pinned_returns_s / pinned_done_s",
           ("06_pinned_memory/set_pinned_returns",
            "06_pinned_memory/set_pinned_done"),
           "set_pinned_returns / set_pinned_done",
           "queueing a copy is real Python time; a small modelled copy can "
           "finish about as fast"),
    Effect("set_pageable_returns_over_done",
           "x.set from pageable memory: call returns over copy done",
           MIXED, "set_returns", "pageable_returns_s / pageable_done_s",
           ("06_pinned_memory/set_pageable_returns",
            "06_pinned_memory/set_pageable_done"),
           "set_pageable_returns / set_pageable_done",
           "a pageable copy must hold the host for the staging and the "
           "copy; a model that stages without the copy returns early"),
    Effect("pageable_nb_over_b_blocked",
           "host blocked, pageable: non-blocking over blocking",
           MIXED, "two_by_two", "blk_pageable_nb_s / blk_pageable_b_s",
           ("06_pinned_memory/blk_pageable_nb",
            "06_pinned_memory/blk_pageable_b"),
           "blk_pageable_nb / blk_pageable_b",
           "the blocking call waits for the real memcpy into device memory "
           "(differently aligned buffers), slower than its modelled staging "
           "and copy; the non-blocking one only for its staging"),
    Effect("both_over_neither_blocked",
           "host blocked: pinned non-blocking over pageable blocking",
           MIXED, "two_by_two", "blk_pinned_nb_s / blk_pageable_b_s",
           ("06_pinned_memory/blk_pinned_nb",
            "06_pinned_memory/blk_pageable_b"),
           "blk_pinned_nb / blk_pageable_b",
           "queueing is real Python time on the host; only the copy is "
           "modelled"),
    Effect("both_over_neither_total",
           "step total: pinned non-blocking over pageable blocking",
           MIXED, "two_by_two", "tot_pinned_nb_s / tot_pageable_b_s",
           ("06_pinned_memory/tot_pinned_nb",
            "06_pinned_memory/tot_pageable_b"),
           "tot_pinned_nb / tot_pageable_b",
           "the step's real copy and model (NumPy, about 0.1 s) outlast "
           "their modelled time and share the host's cores with the host "
           "work, so nothing is hidden by overlap"),
    Effect("host_first_over_consume_first",
           "step total: host work first over consuming first",
           MIXED, "consume_order",
           "host_first_total_s / consume_first_total_s",
           ("06_pinned_memory/later_total", "06_pinned_memory/consume_total"),
           "later_total / consume_total",
           "the step's real copy and model (NumPy, about 0.1 s) outlast "
           "their modelled time and share the host's cores with the host "
           "work, so nothing is hidden by overlap"),
]


# The sizes (names in SIZE_SPECS) each effect is measured at.
EFFECT_SIZES = {
    "pinned_over_pageable_bw": ("bw_large",),
    "large_over_small_bw": ("bw_large", "bw_small"),
    "copy_over_add": ("carry",),
    "demo_copies_over_kernel": ("chunk", "n_streams"),
    "demo_v1_speedup": ("chunk", "n_streams"),
    "demo_v2_speedup": ("chunk", "n_streams"),
    "one_copy_engine_v1_over_v2": ("chunk", "n_streams"),
    "energy_bound": ("energy_n", "energy_chunk"),
    "energy_two_streams": ("energy_n", "energy_chunk"),
    "big_eager_over_fused": ("big_size", "size_trips"),
    "graph_copy_cost": ("big_size", "size_trips"),
    "first_over_later": (),
    "round_trip_over_device_copy": ("trip_large",),
    "small_trip_over_its_bytes": ("trip_small", "trip_large"),
    "print_over_queue": ("dot_n",),
    "device_over_queue": ("dot_n",),
    "wait_each_over_queue_all": ("add_n", "adds"),
    "launch_blocking_over_async": ("dot_n",),
    "wait_first_over_host_first": ("overlap_n",),
    "blocking_over_non_blocking_stream": ("kernel_n",),
    "eager_over_fused_small": ("small", "steps"),
    "eager_over_graph_small": ("small", "steps"),
    "eager_over_fused_smallest": ("small_size", "size_trips"),
    "alloc_pinned_over_pageable": ("alloc",),
    "set_pinned_returns_over_done": ("set_m",),
    "set_pageable_returns_over_done": ("set_m",),
    "pageable_nb_over_b_blocked": ("batch_m", "next_batch"),
    "both_over_neither_blocked": ("batch_m", "next_batch"),
    "both_over_neither_total": ("batch_m", "next_batch"),
    "host_first_over_consume_first": ("batch_m", "next_batch"),
}


# -- formulas, verdicts -------------------------------------------------------
def names_in(expression):
    """The variable names an expression reads (not the functions it calls)."""
    tree = ast.parse(expression, mode="eval")
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(expression, values):
    """``expression`` over ``values`` (names to numbers), as a float."""
    missing = names_in(expression) - set(values)
    if missing:
        raise KeyError(f"{expression!r} needs {sorted(missing)}")
    return float(eval(compile(expression, "<formula>", "eval"),
                      {"__builtins__": {}, "max": max, "min": min},
                      dict(values)))


def usable(x):
    return x is not None and math.isfinite(x) and x > 0


def direction(ratio, band=BAND):
    """``"above 1"``, ``"below 1"`` or ``"about 1"`` (within ``band``)."""
    if ratio > band:
        return "above 1"
    if ratio < 1 / band:
        return "below 1"
    return "about 1"


def verdict(cls, live, ref, factor=FACTOR, band=BAND, gain=False):
    """`AGREES`, `DIFFERS` (device-only, beyond ``factor``), `FLAGGED`
    (mixed, pointing elsewhere), `NO_REFERENCE` or `NOT_MEASURED`.

    With ``gain``, a device-only speedup is judged by its gain, the ratio
    less 1: a factor of 2 on a speedup of 1.2 itself would pass a model
    that shows no speedup at all."""
    if not usable(ref):
        return NO_REFERENCE
    if not usable(live):
        return NOT_MEASURED
    if cls == DEVICE_ONLY:
        if gain and ref > 1:
            live, ref = live - 1, ref - 1
            if live <= 0:
                return DIFFERS
        return AGREES if 1 / factor <= live / ref <= factor else DIFFERS
    if cls == MIXED:
        return AGREES if direction(live, band) == direction(ref, band) \
            else FLAGGED
    raise ValueError(f"unknown class {cls!r}")


# -- the reference ------------------------------------------------------------
def load_reference(path=DEFAULT_REFERENCE):
    """``(info, ref_of)``: a description of the reference, and a function
    giving an `Effect`'s reference ``(value, state)``."""
    path = Path(path)
    data = json.loads(path.read_text())
    if "effects" in data:                   # a fidelity.py run on a GPU
        name = (data.get("devices") or ["a GPU"])[0]
        info = {"path": str(path), "kind": "fidelity", "device": name,
                "date": data.get("date"),
                "note": f"measured by fidelity.py itself on {name}, at the "
                        "same sizes as this run"}

        def ref_of(effect):
            entry = data["effects"].get(effect.key, {})
            value = entry.get("live")
            return value, ("measured" if usable(value) else "not captured")
        return info, ref_of

    lessons = data.get("lessons", {})
    name = data.get("device", {}).get("name", path.stem)
    info = {"path": str(path), "kind": "lessons", "device": name,
            "date": data.get("date"), "commit": data.get("commit"),
            "note": f"{name}, the lessons' glued values, taken at the "
                    "lessons' GPU sizes (until a GPU runs fidelity.py "
                    "itself)"}
    now = {}

    def ref_of(effect):
        values, states = {}, set()
        for full in effect.refs:
            lesson, key = full.split("/", 1)
            entry = lessons.get(lesson, {}).get("values", {}).get(key)
            if lesson not in now:
                now[lesson] = refs.current_fingerprints(lesson)
            states.add(refs.status_of(entry, now[lesson].get(key)))
            if entry is not None:
                values[key] = entry["value"]
        if len(values) < len(effect.refs):
            return None, refs.NOT_CAPTURED
        state = refs.STALE if refs.STALE in states else refs.CURRENT
        return evaluate(effect.formula, values), state
    return info, ref_of


# -- running ------------------------------------------------------------------
def measure(effects, extra=()):
    """Run the experiments named in ``extra`` (the quick calibration ones),
    then those the effects need: ``{experiment: numbers}``, and
    ``{experiment: error text}`` for those that failed. An interrupt (a
    time limit's SIGINT: tools/gpu/run.sh) stops the run there and
    returns what was measured, so that it is still written."""
    raw, errors = {}, {}
    for name in dict.fromkeys(list(extra) + [e.experiment for e in effects]):
        t0 = time.perf_counter()
        try:
            raw[name] = EXPERIMENTS[name]()
        except Exception as exc:            # report it, measure the rest
            errors[name] = f"{type(exc).__name__}: {exc}"
        except KeyboardInterrupt:
            errors[name] = ("KeyboardInterrupt: interrupted; this and the "
                            "experiments after it were not measured")
            break
        finally:
            free_pools()
        print(f"  {name:20s} {time.perf_counter() - t0:6.1f} s",
              file=sys.stderr)
    return raw, errors


def evaluate_effects(effects, raw, errors, ref_of):
    rows = {}
    for e in effects:
        ref, state = ref_of(e)
        live = None
        if e.experiment in raw:
            try:
                live = evaluate(e.live, raw[e.experiment])
            except ZeroDivisionError:
                live = math.inf
        v = verdict(e.cls, live, ref, gain=e.gain)
        here, gpu, why = sizes_of(EFFECT_SIZES.get(e.key, ()))
        rows[e.key] = {
            "title": e.title, "class": e.cls, "lesson": e.lesson,
            "live": live, "reference": ref, "reference_state": state,
            "verdict": v, "reason": e.reason if v == FLAGGED else "",
            "judged_on": "gain (ratio - 1)" if e.gain else "ratio",
            "live_formula": f"{e.experiment}: {e.live}",
            "reference_keys": list(e.refs),
            "reference_formula": e.formula,
            "size": here, "reference_size": gpu,
            "same_size": not why, "size_note": why,
        }
        if e.experiment in errors:
            rows[e.key]["error"] = errors[e.experiment]
    return rows


def summarize(rows):
    dev = [r for r in rows.values() if r["class"] == DEVICE_ONLY]
    mix = [r for r in rows.values() if r["class"] == MIXED]
    agree = sum(r["verdict"] == AGREES for r in dev)
    flagged = sum(r["verdict"] == FLAGGED for r in mix)
    mixed_ok = sum(r["verdict"] == AGREES for r in mix)
    # a reference whose lesson cell changed since the GPU ran it measured
    # other code: a miss against it says nothing until a GPU re-measures
    stale_misses = sorted(k for k, r in rows.items()
                          if r["class"] == DEVICE_ONLY
                          and r["verdict"] != AGREES
                          and r.get("reference_state") == refs.STALE)
    return {
        "device_only": len(dev), "device_only_within_factor": agree,
        "device_only_misses_on_stale_references": stale_misses,
        "mixed": len(mix), "mixed_agree": mixed_ok,
        "mixed_flagged": flagged,
        # issue 17's "must show": every device-only effect within the
        # factor, every mixed one agreeing or flagged, at most a quarter
        # of the mixed ones flagged
        "must_show_met": (agree == len(dev) and mixed_ok + flagged
                          == len(mix) and flagged <= len(mix) / 4),
    }


def machine():
    return {"python": platform.python_version(), "numpy": np.__version__,
            "system": platform.system(), "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine()}


def device_properties(index=0):
    """The device's properties as ``getDeviceProperties`` gives them, the
    numbers and tuples of numbers (for `calibrate.py`: a profile reports
    them), and its name."""
    props = cp.cuda.runtime.getDeviceProperties(index)
    out = {}
    for key, value in props.items():
        if isinstance(value, bytes):
            value = value.decode(errors="replace").rstrip("\x00")
            if key != "name":
                continue
        elif isinstance(value, (tuple, list)):
            if not all(isinstance(v, int) for v in value):
                continue
            value = list(value)
        elif not isinstance(value, int):
            continue
        out[key] = value
    return out


def run(only=None, reference=DEFAULT_REFERENCE):
    """Measure the effects (all, or the keys in ``only``) and compare."""
    effects = [e for e in EFFECTS if not only or e.key in only]
    unknown = set(only or ()) - {e.key for e in EFFECTS}
    if unknown:
        raise SystemExit(f"unknown effects: {sorted(unknown)}")
    info, ref_of = load_reference(reference)
    t0 = time.perf_counter()
    raw, errors = measure(effects, () if only else CALIBRATION)
    return assemble(effects, raw, errors, info, ref_of,
                    time.perf_counter() - t0)


def assemble(effects, raw, errors, info, ref_of, seconds=0.0,
             backend=BACKEND):
    """The result object that ``--json`` writes, from measured numbers."""
    rows = evaluate_effects(effects, raw, errors, ref_of)
    return {
        "backend": backend, "devices": device_names(),
        "device_properties": device_properties(), "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"),
        "seconds": round(seconds, 1),
        "live_note": live_note(backend),
        "reference": info, "factor": FACTOR, "band": BAND,
        "sizes": SIZES, "gpu_sizes": GPU_SIZES, "effects": rows,
        "raw": raw, "errors": errors,
        "summary": summarize(rows),
    }


# -- output -------------------------------------------------------------------
def fmt(x):
    if x is None:
        return "-"
    return refs.format_value(x)


def live_header(result):
    return "this model" if result["backend"] == "cpu" else "this GPU"


def live_note(backend):
    """What this run's values are."""
    if backend == "gpu":
        return ("this run is on a GPU: its values are this GPU's own, at "
                "the same sizes as the model's run; pass its --json as "
                "--reference to compare the model with it size for size")
    return ("this run is on the CPU device model, at the GPU lessons' sizes "
            "where the model can afford them (each row says its size)")


def size_cell(r):
    """The size an effect was measured at, and the reference's where it
    differs."""
    if r.get("same_size", True):
        return r.get("size", "-")
    return f"{r['size']} (GPU: {r['reference_size']})"


def table(result):
    """The effects as aligned text, for the terminal."""
    head = ["effect", "class", "size", live_header(result), "reference",
            "verdict"]
    lines = []
    for key, r in result["effects"].items():
        v = r["verdict"] + (f" ({r['reason']})" if r["reason"] else "")
        cls = r["class"] + (", gain" if r["judged_on"] != "ratio" else "")
        lines.append([key, cls, size_cell(r), fmt(r["live"]),
                      fmt(r["reference"]), v])
    n = len(head) - 1
    widths = [max(len(x[i]) for x in [head] + lines) for i in range(n)]
    out = ["  ".join(c.ljust(w) for c, w in zip(row[:n], widths))
           + "  " + row[n] for row in [head] + lines]
    s = result["summary"]
    out += ["", f"live: {result['live_note']}",
            f"reference: {result['reference']['note']}",
            f"device-only within {FACTOR:g}x: "
            f"{s['device_only_within_factor']} of {s['device_only']}; "
            f"mixed flagged: {s['mixed_flagged']} of {s['mixed']}; "
            f"must show met: {s['must_show_met']}"
            + (f" (misses against stale references: "
               f"{', '.join(s['device_only_misses_on_stale_references'])})"
               if s["device_only_misses_on_stale_references"] else "")]
    return "\n".join(out)


COMMAND = ("python benchmarks/fidelity.py --json benchmarks/fidelity-cpu.json "
           "--markdown book/fidelity.md")


ISSUE_ROWS = (("event_record_s", "an event's record on a stream",
               "event"),
              ("view_s", "a view, x[1:] (queues no work)", "call"),
              ("launch_s", "x + x on 1,000 float32 (a launch)", "launch"),
              ("reduction_s", "x.sum() on 1,000 float32 (a reduction's "
               "launch)", "reduction"))


def duplex(raw):
    """``(h2d + d2h) / both`` of `copy_duplex`: 2 for a full-duplex link,
    1 when the two directions take turns; None when not measured."""
    d = raw.get("copy_duplex")
    if not d or not d.get("both_s"):
        return None
    return (d["h2d_s"] + d["d2h_s"]) / d["both_s"]


def calibration_section(result):
    """Lines of the page on the experiments no effect reads: ``issue_costs``
    (the host's time per call in this run beside what the profile charges
    the model's device clock) and ``copy_duplex``."""
    lines = []
    ratio = duplex(result["raw"])
    if ratio is not None:
        d = result["raw"]["copy_duplex"]
        size = size_label("bw_large", result["sizes"]["bw_large"])
        lines += [
            "## Copies in both directions at once",
            "",
            f"An H2D copy of {size} "
            f"from pinned memory took {d['h2d_s'] * 1e3:.2f} ms alone, a D2H "
            f"copy of as many {d['d2h_s'] * 1e3:.2f} ms, and both at once on "
            f"two streams {d['both_s'] * 1e3:.2f} ms (events): the two alone "
            f"over both at once is {ratio:.2f}, where 2 is a link that "
            "carries both directions at full rate and 1 one whose "
            "directions take turns. The model gives each direction its own "
            "engine at the link's full rate, so it reads about 2; a GPU's "
            "run says what its link does (`calibrate.py` prints it; the "
            "profile has no entry for it yet).",
            "",
        ]
    costs = result["raw"].get("issue_costs")
    if not costs:
        return lines
    from src.cpudevice._profile import Profile
    profile = Profile.load()
    on_model = result["backend"] != "gpu"
    lines += [
        "## The host's cost to issue a call",
        "",
        "Measured for `benchmarks/calibrate.py`, no effect reads them: the "
        "host's time per call, the fastest of five rounds of "
        f"{ISSUE_CALLS:,} calls from an idle device, beside the issue time "
        f"the model's {profile.name} profile charges for the call's kind "
        "(`host.issue_us`). "
        + ("Here they time the model's own Python, which its device clock "
           "does not count: it charges the profile's times instead (see "
           "the backends page, \"When the host issued it\"). On a GPU they "
           "are CuPy's, and `calibrate.py` solves the profile's event, call "
           "and reduction times from them."
           if on_model else
           "On this GPU they are CuPy's own, and `calibrate.py` solves the "
           "profile's event, call and reduction times from them."),
        "",
        f"| call | this run (µs) | {profile.name} profile (µs) |",
        "|---|---|---|",
    ]
    for key, what, kind in ISSUE_ROWS:
        if key in costs:
            lines.append(f"| {what} | {costs[key] * 1e6:.1f} | "
                         f"{profile.issue_s(kind) * 1e6:g} ({kind}) |")
    return lines + [""]


def markdown(result):
    """The page ``book/fidelity.md``: the table and what it means."""
    s, info = result["summary"], result["reference"]
    ref_name = info["device"].replace("80GB HBM3", "").strip()
    live = live_header(result)
    lines = [
        "# Fidelity of the CPU device model", "",
        "<!-- Generated by benchmarks/fidelity.py; do not edit by hand. -->",
        "",
        "How closely does the CPU device model reproduce the effects the "
        "book teaches? `benchmarks/fidelity.py` measures "
        f"{len(result['effects'])} of them, each a ratio the lessons "
        "measure, the way the lessons measure them, and sets each beside "
        f"the reference GPU's: {info['note']}.",
        "",
        "Each effect has a class. A **device-only** effect is measured "
        "with CUDA events, or dominated by device time (copy against "
        "compute, pinned against pageable bandwidth, overlap on a "
        "timeline, fused against eager at a large size): it agrees when "
        f"it is within a factor of {FACTOR:g} of the GPU's, either way; "
        "for a speedup, the factor applies to its gain, the speedup less "
        "1 (a GPU's 1.2 asks for 1.1 to 1.4), since a factor of 2 on the "
        "speedup itself would pass a model that shows none. A "
        "**mixed** effect sets host time against device time (queueing "
        "against printing, a graph against eager launches, first use in "
        "a fresh process, a host held by a copy): it agrees when it "
        "points the GPU's way, both above 1, both below 1, or both "
        f"within a factor of {BAND:g} of 1. The model's device timings "
        "can follow a profile, but its host is the real one: Python, "
        "NumPy doing the real work on the CPU, and threads on the same "
        "cores. Where that real work is slower than the modelled time, "
        "or competes with the host's own work, a mixed effect can point "
        "the other way; it is then *flagged*, with the reason.",
        "",
        "Each effect is measured here at the size the GPU lesson used, the "
        "size the reference was measured at, where the model can afford "
        "it, and otherwise at the largest size it can afford: the model "
        "does every operation's real work on the CPU, so an experiment's "
        "real work must fit in about ten seconds on 2 cores, and its "
        "arrays in the model's 1 GiB device. No size is chosen to make an "
        "effect agree. Where the sizes differ, the size column gives the "
        "GPU's too, and the notes below say why. Device-only effects are "
        "read on the device clock, as a GPU benchmark reads them: events "
        "recorded after a warm-up around work that is only queued, with "
        "no host wait between them (except inside a copy from pageable "
        "memory, which holds the host on a GPU too).",
        "",
        f"| effect | lesson | class | size | {live} | {ref_name} | "
        "agrees? | reason if flagged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, r in result["effects"].items():
        ref = fmt(r["reference"])
        if r["reference_state"] == refs.STALE:
            ref += " (stale)"
        agrees = {AGREES: "yes", DIFFERS: "no", FLAGGED: "flagged"}.get(
            r["verdict"], r["verdict"])
        cls = r["class"] + (", gain" if r["judged_on"] != "ratio" else "")
        lines.append(f"| {r['title']} | {r['lesson'][:2]} | {cls} "
                     f"| {size_cell(r)} | {fmt(r['live'])} | {ref} "
                     f"| {agrees} | {r['reason']} |")
    lines += [
        "",
        f"Device-only effects within a factor of {FACTOR:g}: "
        f"{s['device_only_within_factor']} of {s['device_only']}"
        + (f"; {len(s['device_only_misses_on_stale_references'])} of those "
           "that miss compare against a stale reference, one the GPU "
           "measured with code the book has since changed, and wait for a "
           "GPU to re-measure it"
           if s["device_only_misses_on_stale_references"] else "")
        + f". Mixed effects pointing the GPU's way: {s['mixed_agree']} of "
        f"{s['mixed']}; flagged: {s['mixed_flagged']}.",
        "",
        f"Measured {result['date']} with `BOOK_BACKEND={result['backend']}`"
        f" on {result['machine']['cpus']} CPU cores, Python "
        f"{result['machine']['python']}, in {result['seconds']:g} s; "
        f"regenerate with `{COMMAND}`. \"Stale\" marks a reference whose "
        "lesson cell, or code it calls, has changed since the GPU ran it.",
        "",
    ]
    notes = {}
    for r in result["effects"].values():
        if r.get("size_note"):
            notes.setdefault(r["size_note"], []).append(r["title"])
    if notes:
        lines += ["Sizes smaller than the GPU lesson's:", ""]
        lines += [f"* {'; '.join(f'*{t}*' for t in titles)}: "
                  f"{note.removeprefix(SMALLER)}."
                  for note, titles in notes.items()]
        lines.append("")
    lines += calibration_section(result)
    lines += [
        "## How each effect is computed",
        "",
        "Measured here: the experiment in `benchmarks/fidelity.py` and the "
        "ratio of its numbers. On the GPU: the lesson's glued keys and the "
        "ratio taken of them.",
        "",
        "| effect | key | measured here | GPU reference |",
        "|---|---|---|---|",
    ]
    for key, r in result["effects"].items():
        keys = ", ".join(f"`{k}`" for k in r["reference_keys"])
        lines.append(f"| {r['title']} | `{key}` | `{r['live_formula']}` | "
                     f"{keys}: "
                     f"`{r['reference_formula']}` |")
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--markdown", help="write the table as a book page here")
    p.add_argument("--reference", default=str(DEFAULT_REFERENCE),
                   help="the GPU reference: a book/reference/*.json file or "
                        "the --json of fidelity.py run on a GPU")
    p.add_argument("--only", nargs="*", help="measure only these effects")
    args = p.parse_args(argv)
    result = run(args.only, args.reference)
    print(table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(markdown(result))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
