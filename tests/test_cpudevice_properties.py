"""Random programs over several streams, joined by events, compute what a
serial run computes; and the model leaks neither threads nor memory."""
import gc
import threading

import numpy
from hypothesis import given, settings, strategies as st

import src.cpudevice as cp
import src.cpudevice.cupyx as cpx
from modelkit import pinned_bytes_in_use, wait_until

N = 64
OPS = ["add", "mul", "scale", "copy"]

op = st.tuples(st.sampled_from(OPS), st.integers(0, 3), st.integers(0, 3),
               st.integers(0, 2))
program = st.lists(op, min_size=1, max_size=40)


def run(prog, n_streams, serial):
    """Run ``prog`` on 4 arrays; each op on stream ``k`` (or one stream),
    after waiting for the last writer of each array it touches."""
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    host = [numpy.full(N, i + 1.0) for i in range(4)]
    arrays = [cp.asarray(h, blocking=True) for h in host]
    last = [None] * 4          # event after the last write/read per array
    for name, dst, src, k in prog:
        s = streams[0 if serial else k % n_streams]
        for i in {dst, src}:
            if last[i] is not None:
                s.wait_event(last[i])
        with s:
            a, b = arrays[dst], arrays[src]
            if name == "add":
                cp.add(a, b, out=a)
            elif name == "mul":
                cp.multiply(a, 0.5, out=a)
                cp.add(a, b, out=a)
            elif name == "scale":
                a *= 1.25
            else:
                a[...] = b
            ev = s.record()
        last[dst] = last[src] = ev
    for s in streams:
        s.synchronize()
    return [a.get() for a in arrays]


@settings(max_examples=25, deadline=None)
@given(program)
def test_streams_joined_by_events_compute_what_serial_code_computes(prog):
    expected = run(prog, 1, serial=True)
    got = run(prog, 3, serial=False)
    for e, g in zip(expected, got):
        numpy.testing.assert_array_equal(g, e)


def model_threads():
    return sum(t.name.startswith("cpudevice-") for t in threading.enumerate())


def test_threads_pool_and_pinned_bytes_return_to_baseline():
    pool = cp.get_default_memory_pool()
    ppool = cp.get_default_pinned_memory_pool()
    gc.collect()
    used0 = pool.used_bytes()
    for i in range(200):
        s = cp.cuda.Stream(non_blocking=True)
        e = cp.cuda.Event()
        with s:
            x = cp.ones(1000) * i
            h = cpx.empty_pinned(1000)
            x.get(out=h)
            e.record()
        e.synchronize()
    del s, e, x, h
    gc.collect()
    assert pool.used_bytes() == used0
    ppool.free_all_blocks()
    pool.free_all_blocks()
    assert pinned_bytes_in_use() == 0
    assert wait_until(lambda: model_threads() <= 1)   # at most the null's
