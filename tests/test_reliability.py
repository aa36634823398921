"""Stress, lifetimes and leaks of the CPU device model (issue: reliability).

Every wait is bounded; a hang dumps all thread stacks (faulthandler)."""
import faulthandler
import gc
import sys
import threading
import time

import numpy
import pytest

import src.cpudevice as cp
import src.cpudevice.cupyx as cpx
from modelkit import Gate, pinned_bytes_in_use, wait_until

N_OPS, N_STREAMS, N_ARRAYS, SIZE = 10_000, 8, 16, 32


def stress_program(seed):
    rng = numpy.random.default_rng(seed)
    return [(int(rng.integers(4)), int(rng.integers(N_ARRAYS)),
             int(rng.integers(N_ARRAYS)), int(rng.integers(N_STREAMS)))
            for _ in range(N_OPS)]


def step(xp, kind, a, b):
    """One operation of a stress program, with NumPy or with the model."""
    if kind == 0:
        xp.add(a, b, out=a)
    elif kind == 1:
        xp.multiply(a, 0.5, out=a)
    elif kind == 2:
        xp.subtract(a, 0.25 * b, out=a)
    else:
        a[...] = b
    xp.clip(a, -1e6, 1e6, out=a)


def oracle(prog):
    """The program run serially with NumPy: what every ordering must give."""
    arrays = [numpy.full(SIZE, i + 1.0) for i in range(N_ARRAYS)]
    for kind, dst, src, _ in prog:
        step(numpy, kind, arrays[dst], arrays[src])
    return arrays


def on_streams(prog):
    """The program over 8 streams, each op after the events of the last ops
    that touched its arrays."""
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(N_STREAMS)]
    arrays = [cp.full(SIZE, i + 1.0) for i in range(N_ARRAYS)]
    cp.cuda.Device().synchronize()
    last = [None] * N_ARRAYS
    for kind, dst, src, k in prog:
        s = streams[k]
        for i in (dst, src):
            if last[i] is not None:
                s.wait_event(last[i])
        with s:
            step(cp, kind, arrays[dst], arrays[src])
            ev = s.record()
        last[dst] = last[src] = ev
    for s in streams:
        s.synchronize()
    return [a.get() for a in arrays]


@pytest.mark.slow                  # 10 s: CI runs it after the book build
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stress_10000_ops_on_8_streams_match_the_serial_oracle(seed):
    faulthandler.dump_traceback_later(100, exit=True, file=sys.stderr)
    try:
        t = time.monotonic()
        prog = stress_program(seed)
        got = on_streams(prog)
        for g, e in zip(got, oracle(prog)):
            numpy.testing.assert_array_equal(g, e)
        assert time.monotonic() - t < 100
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_pinned_source_outlives_its_reference_until_the_copy_ran():
    n = 1 << 22                                   # 32 MiB of float64
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    host = cpx.empty_pinned(n)
    host[:] = 3.0
    dev = cp.empty(n)
    dev.set(host, stream=s)
    del host                                      # the copy has not run
    gc.collect()
    others = [cpx.empty_pinned(n) for _ in range(2)]   # would reuse it
    for o in others:
        o[:] = -1.0
    gate.open()
    s.synchronize()
    assert float(dev.min()) == 3.0 and float(dev.max()) == 3.0


def test_device_array_outlives_its_reference_until_the_kernel_ran():
    n = 1 << 22
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.full(n, 2.0)
    gate = Gate().hold_stream(s)
    with s:
        y = x * 5                                 # reads x later
        del x                                     # block back to s's arena
        z = cp.full(n, 7.0)                       # may reuse x's block,
    gate.open()                                   # after y in stream order
    s.synchronize()
    assert float(y.min()) == 10.0 and float(y.max()) == 10.0
    assert float(z.sum()) == 7.0 * n


def test_a_thousand_of_everything_returns_to_baseline():
    pool = cp.get_default_memory_pool()
    ppool = cp.get_default_pinned_memory_pool()
    gc.collect()
    pool.free_all_blocks()
    ppool.free_all_blocks()
    used, pinned = pool.used_bytes(), pinned_bytes_in_use()
    threads = threading.active_count()
    for i in range(1000):
        s = cp.cuda.Stream(non_blocking=True)
        e = cp.cuda.Event()
        h = cpx.empty_pinned(256)
        with s:
            x = cp.arange(256, dtype=cp.float64) + i
            x.get(stream=s, out=h, blocking=False)
            e.record(s)
        e.synchronize()
        assert h[0] == i
    del s, e, h, x
    gc.collect()
    assert pool.used_bytes() == used
    pool.free_all_blocks()
    assert pool.total_bytes() == 0
    ppool.free_all_blocks()
    assert pinned_bytes_in_use() == pinned
    assert wait_until(lambda: threading.active_count() <= threads)
