"""04, async: queueing work against doing it, waiting after each operation,
a blocking launch, host work beside device work."""
import functools
import io
import json
import math
import os
import statistics
import subprocess
import sys

import numpy as np
from src import cp

from .. import BOOK
from ..effect import MIXED, Effect
from ..experiment import experiment, sync
from ..sizes import SIZES


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
import json
from src import cp
from src.timing import host_clock
x = cp.random.normal(size=({n}, {n}))
y = cp.dot(x, x).sum()
cp.cuda.Device().synchronize()
t = host_clock()
y = cp.dot(x, x).sum()
launch_s = host_clock() - t
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
    with Benchmark() as sort_clock:
        np.sort(probe)
    h = rng.random(max(2**12, int(2**18 * device_clock.seconds
                                   / sort_clock.seconds)))

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


EFFECTS = [
    Effect("print_over_queue",
           "print(y) over queueing dot(x, x).sum()",
           MIXED, "queue_print", "print_s / queue_s",
           ("04_1_queueing/print_ms", "04_1_queueing/queue_ms"),
           "print_ms / queue_ms",
           "print waits for the real product on the CPU, which can take "
           "longer or shorter than the modelled one",
           sizes=("dot_n",)),
    Effect("device_over_queue",
           "dot(x, x).sum(): device time (events) over queueing it",
           MIXED, "queue_print", "device_s / queue_s",
           ("04_1_queueing/queue_ratio",), "queue_ratio",
           "the queueing is the model's real Python, several times "
           "CuPy's; a product small enough for the modelled device to "
           "finish in that time would point the other way",
           sizes=("dot_n",)),
    Effect("wait_each_over_queue_all",
           "10,000 additions: waiting after each over waiting once",
           MIXED, "wait_each", "wait_each_s / queue_all_s",
           ("04_2_waiting/wait_ratio",), "wait_ratio",
           "a wait's round trip is a thread wake-up on the model, which a "
           "busy 2-core host can make long or short",
           sizes=("add_n", "adds")),
    Effect("launch_blocking_over_async",
           "launch with CUDA_LAUNCH_BLOCKING=1 over =0",
           MIXED, "launch_blocking", "blocking_s / async_s",
           ("04_1_queueing/launch_blocking_ms", "04_1_queueing/launch_async_ms"),
           "launch_blocking_ms / launch_async_ms",
           "a blocking launch waits for the CPU's real product as well as "
           "the modelled one",
           sizes=("dot_n",)),
    Effect("wait_first_over_host_first",
           "host work after the first wait over before it",
           MIXED, "host_beside_device", "wait_first_s / host_first_s",
           ("04_2_waiting/wrong_ms", "04_2_waiting/right_ms"),
           "wrong_ms / right_ms",
           "at a quarter of the GPU's size, the host's issuing and waiting, "
           "which neither order hides, are over a quarter of the modelled "
           "device work (on the H100, a tenth)",
           sizes=("overlap_n",)),
]
