"""Second GPU run of 2026-11-27: the questions the lane's run left open.

    BOOK_BACKEND=gpu python3 .gpu/probe.py OUT.json

A. The energy kernels against a device copy, timed two ways: one call
   between two events (as benchmarks/run.py does: the host's launch gap
   counts) and 20 calls back to back between two events (the gap hidden).
B. Two 256 MiB pinned H2D copies on two non-blocking streams, against the
   same two on one stream (benchmarks/README "To confirm" item 2).
C. cudaMalloc's host time, and a managed array's first touch against a
   prefetched one (item 5).
"""
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from src import cp, pick  # noqa: E402
from src.energy import TwoStageEnergy, harmonic_energy_kernel  # noqa: E402

out = {}


def save():
    Path(sys.argv[1]).write_text(json.dumps(out, indent=1))


def events(fn, calls=1, repeats=7):
    """Median seconds per call of ``calls`` calls of fn between two events,
    after a warm-up."""
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / calls)
    return float(np.median(times))


# A. energy kernels
n = pick(cpu=1 << 22, gpu=1 << 28)
y = cp.random.default_rng(0).random(n, dtype=cp.float32)
z = cp.empty_like(y)


def copy_y():
    z[...] = y


import energy_ceiling  # noqa: E402

grid, block = energy_ceiling.launch_shape()


def raw_cached(x, k, mu):
    partials = cp.empty(grid[0], dtype=cp.float64)
    energy_ceiling.energy_partials(grid, block, (
        x, np.int64(x.size), np.float32(k), np.float32(mu), partials))
    return partials.sum().astype(np.float32)


variants = {
    "copy": copy_y,
    "raw_energy (as benchmarked)": lambda: energy_ceiling.raw_energy(
        y, 1.0, 0.5),
    "raw, launch shape cached": lambda: raw_cached(y, 1.0, 0.5),
    "cp.sum(y) (CUB)": lambda: cp.sum(y),
    "one-liner": lambda: cp.sum(1.0 * (y - 0.5) ** 2 / 2),
}
for rows_per_sm in (4, 8, 16, 32, 64):
    e = TwoStageEnergy(harmonic_energy_kernel, rows_per_sm=rows_per_sm)
    variants[f"harmonic_energy rows_per_sm={rows_per_sm}"] = (
        lambda e=e: e(y, 1.0, 0.5))
res = {}
for name, fn in variants.items():
    t = time.perf_counter()
    res[name] = {"one_call_ms": events(fn, 1) * 1e3,
                 "per_call_of_20_ms": events(fn, 20) * 1e3}
    print(f"{name:42s} {res[name]['one_call_ms']:8.3f} "
          f"{res[name]['per_call_of_20_ms']:8.3f} ms", flush=True)
c1 = res["copy"]["one_call_ms"]
c20 = res["copy"]["per_call_of_20_ms"]
for name, r in res.items():     # read rate over a copy's (2 x bytes) rate
    r["copy_fraction_one"] = c1 / (2 * r["one_call_ms"])
    r["copy_fraction_20"] = c20 / (2 * r["per_call_of_20_ms"])
t0 = time.perf_counter()
for _ in range(100):
    cp.cuda.runtime.getDeviceProperties(0)
out["getDeviceProperties_us"] = (time.perf_counter() - t0) / 100 * 1e6
out["energy"] = res
out["n"] = n
out["copy_GBps"] = 2 * y.nbytes / (c20 / 1e3) / 1e9
save()
del y, z

# B. two H2D copies on two streams against one stream
m = pick(cpu=16 << 20, gpu=256 << 20) // 4
hosts = [cp.cuda.alloc_pinned_memory(4 * m) for _ in range(2)]
srcs = [np.frombuffer(h, np.float32, m) for h in hosts]
for s in srcs:
    s[:] = 1
devs = [cp.empty(m, cp.float32) for _ in range(2)]
streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]


def two_streams():
    for d, s, st in zip(devs, srcs, streams):
        d.set(s, stream=st)
    for st in streams:
        st.synchronize()


def one_stream():
    for d, s in zip(devs, srcs):
        d.set(s, stream=streams[0])
    streams[0].synchronize()


def wall(fn, repeats=7):
    fn()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


one = wall(one_stream)
two = wall(two_streams)
single = wall(lambda: (devs[0].set(srcs[0], stream=streams[0]),
                       streams[0].synchronize()))
out["h2d"] = {"bytes_each": 4 * m, "one_stream_ms": one * 1e3,
              "two_streams_ms": two * 1e3, "single_copy_ms": single * 1e3,
              "two_over_one": two / one,
              "single_GBps": 4 * m / single / 1e9}
print("h2d", out["h2d"], flush=True)
save()
del devs, srcs, hosts

# C. cudaMalloc's host time; managed first touch against prefetched
cp.get_default_memory_pool().free_all_blocks()
sizes = [1 << 20, 16 << 20, 256 << 20]
malloc = {}
try:
    for size in sizes:
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            p = cp.cuda.runtime.malloc(size)
            ts.append(time.perf_counter() - t)
            cp.cuda.runtime.free(p)
        malloc[size] = float(np.median(ts)) * 1e6
except Exception as e:                       # a probe, not the book
    malloc["error"] = repr(e)
out["malloc_us"] = malloc
print("malloc us", malloc, flush=True)
managed = {}
try:
    nbytes = 256 << 20
    for how in ("first touch", "prefetched"):
        mem = cp.cuda.malloc_managed(nbytes)
        a = cp.ndarray((nbytes // 4,), cp.float32, mem)
        host = np.frombuffer(
            (np.ctypeslib.as_ctypes_type(np.uint8) * nbytes).from_address(
                mem.ptr), np.float32)
        host[:] = 1                           # pages on the host now
        cp.cuda.Device().synchronize()
        if how == "prefetched":
            t = time.perf_counter()
            cp.cuda.runtime.memPrefetchAsync(mem.ptr, nbytes, 0, 0)
            cp.cuda.Device().synchronize()
            managed["prefetch_s"] = time.perf_counter() - t
        t = time.perf_counter()
        a *= 2
        cp.cuda.Device().synchronize()
        managed[how + "_s"] = time.perf_counter() - t
        del a, mem, host
    managed["bytes"] = nbytes
except Exception as e:                       # a probe, not the book
    managed["error"] = repr(e)
out["managed"] = managed
print("managed", managed, flush=True)
save()
