"""Pinned host memory on the CPU device model
(`cupy.cuda.pinned_memory`, `cupyx.empty_like_pinned`): pageable copies are
staged, pinned copies are asynchronous and read their buffer later."""
import gc
import threading

import numpy
import pytest

import src.cpudevice as cp
import src.cpudevice.cupyx as cpx
from modelkit import WAIT_S, Gate, host_copy_calls


def test_pinned_memory_and_pool():
    ppool = cp.get_default_pinned_memory_pool()
    mem = cp.cuda.alloc_pinned_memory(4000)
    a = numpy.frombuffer(mem, numpy.float32, 1000)
    assert cp.cuda.pinned_memory.is_memory_pinned(a.ctypes.data)
    assert not cp.cuda.pinned_memory.is_memory_pinned(
        numpy.empty(10).ctypes.data)
    gc.collect()          # an earlier test's garbage frees its blocks now
    n = ppool.n_free_blocks()
    del a, mem
    gc.collect()
    assert ppool.n_free_blocks() == n + 1
    b = cpx.zeros_pinned((3, 4), numpy.float32)
    assert b.shape == (3, 4) and (b == 0).all()
    c = cpx.empty_like_pinned(b)
    d = cpx.zeros_like_pinned(b, dtype=numpy.int8)
    assert c.dtype == numpy.float32 and d.dtype == numpy.int8
    assert cp.cuda.pinned_memory.is_memory_pinned(d.ctypes.data)


def test_pageable_set_returns_when_its_copy_is_done():
    # as the CUDA driver's: set() from pageable memory holds the host until
    # the copy is done (lesson 6), so the source may change at once
    s = cp.cuda.Stream(non_blocking=True)
    host = numpy.ones(1000)
    dev = cp.empty(1000)
    dev.set(host, stream=s)
    assert s.done
    host[:] = 5
    assert dev.get(stream=s).sum() == 1000


def test_pageable_asarray_is_staged_so_the_source_can_change_at_once():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    host = numpy.ones(1000)
    with s:
        dev = cp.asarray(host)   # returns once staged, before the copy runs
    assert not s.done
    host[:] = 5
    gate.open()
    s.synchronize()
    assert dev.get(stream=s).sum() == 1000


def test_pinning_the_source_frees_the_copy_in_but_not_a_copy_out():
    """Chapter 7's exercise 2: with ``h`` pinned, ``cp.asarray(h)`` is one
    asynchronous copy (no staging: it returns while its stream is held),
    but ``cp.asnumpy(result)`` still writes into a new, pageable array,
    whose copy is staged and holds the host until it is done."""
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    h = cpx.zeros_pinned(1000)
    with s:
        x = cp.asarray(h)           # returns with the copy still queued
        result = x + 1
    assert not s.done
    returned = threading.Event()
    out = []

    def copy_out():
        out.append(cp.asnumpy(result, stream=s))
        returned.set()
    thread = threading.Thread(target=copy_out)
    thread.start()
    assert not returned.wait(0.2)   # held: its copy waits behind the gate
    gate.open()
    assert returned.wait(WAIT_S)
    thread.join()
    assert out[0].sum() == 1000


def test_pinned_copy_is_asynchronous_and_reads_the_buffer_later():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    host = cpx.empty_pinned(1000)
    host[:] = 1
    dev = cp.empty(1000)
    dev.set(host, stream=s)      # queued: reads host when it runs
    host[:] = 5                  # the hazard: overwritten before the copy
    gate.open()
    s.synchronize()
    assert dev.get().sum() == 5000


def held_arange_and_pinned_out():
    """``arange(100)`` on a stream a gate holds, and a pinned ``out`` of
    -1s: ``(stream, dev, gate, out)``."""
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        dev = cp.arange(100, dtype=cp.float32)
    gate = Gate().hold_stream(s)
    out = cpx.empty_pinned(100, numpy.float32)
    out[:] = -1
    return s, dev, gate, out


def test_get_into_pinned_out_without_blocking():
    s, dev, gate, out = held_arange_and_pinned_out()
    r = dev.get(stream=s, out=out, blocking=False)
    assert r is out and out[0] == -1      # not copied yet
    gate.open()
    s.synchronize()
    assert out.tolist() == list(range(100))
    back = cp.asnumpy(dev, stream=s, out=numpy.empty(100, numpy.float32))
    assert back[99] == 99
    x = cp.asarray(out, blocking=True)
    assert float(x[5]) == 5


def test_asnumpy_waits_for_its_copy_by_default():
    s, dev, gate, out = held_arange_and_pinned_out()
    opener = threading.Timer(0.1, gate.open)
    opener.start()
    try:
        r = cp.asnumpy(dev, stream=s, out=out)   # blocking=True: it waits
        assert r is out and out.tolist() == list(range(100))
    finally:
        gate.open()
        opener.join(WAIT_S)
    s.synchronize()


def test_empty_like_pinned_keeps_layouts_and_refuses_subok():
    f = numpy.zeros((3, 4), order="F")
    assert cpx.empty_like_pinned(f).flags.f_contiguous
    assert cpx.empty_like_pinned(f, order="A").flags.f_contiguous
    assert cpx.empty_like_pinned(f, order="C").flags.c_contiguous
    assert cpx.empty_like_pinned(numpy.zeros((3, 4)),
                                 order="A").flags.c_contiguous
    t = numpy.zeros((2, 3, 4)).transpose(2, 0, 1)
    assert cpx.empty_like_pinned(t).strides == numpy.empty_like(t).strides
    assert cpx.zeros_like_pinned(f).flags.f_contiguous
    assert cpx.empty_like_pinned(f, shape=(5,)).shape == (5,)
    assert cpx.empty_like_pinned(f, dtype=numpy.int8).dtype == numpy.int8
    d = cp.zeros((3, 4), order="F")
    assert cpx.empty_like_pinned(d).flags.f_contiguous
    for subok in (True, False):
        with pytest.raises(TypeError, match="subok is not supported"):
            cpx.empty_like_pinned(f, subok=subok)
    with pytest.raises(ValueError, match="order not understood"):
        cpx.empty_like_pinned(f, order="X")


def test_pageable_copies_from_many_threads_share_the_bounce_buffers():
    """Uploads (host threads) and downloads (stream workers) take and give
    the staging buffers at once; each copy still gets its own bytes."""
    errors = []

    def copy_back_and_forth(i):
        try:
            with cp.cuda.Stream(non_blocking=True):
                for n in range(10):
                    h = numpy.full(4096 + 512 * n, i, numpy.float32)
                    if not (cp.asarray(h).get() == h).all():
                        errors.append(i)
        except Exception as e:          # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=copy_back_and_forth, args=(i,))
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert not any(t.is_alive() for t in threads) and not errors, errors


def test_the_bounce_buffers_of_a_large_copy_are_kept_for_the_next():
    """As a driver keeps its pinned staging buffers: a large pageable copy's
    buffer is there for the next one, not returned for a fresh one."""
    from modelkit import staging_buffer_sizes
    h = numpy.ones(16 * 2**20 // 4, numpy.float32)
    cp.asarray(h, blocking=False)           # staged: takes a buffer
    cp.cuda.Device().synchronize()
    assert max(staging_buffer_sizes()) >= h.nbytes
    before = sorted(staging_buffer_sizes())
    cp.asarray(h, blocking=False)
    cp.cuda.Device().synchronize()
    assert sorted(staging_buffer_sizes()) == before


def test_the_bounce_buffers_kept_are_the_largest_that_fit_the_limits():
    from modelkit import fresh_staging
    mib = 2**20
    st = fresh_staging()
    for n in (3, 1, 5, 2, 4, 6):
        st.give(numpy.empty(n * mib, numpy.uint8))
    # at most KEEP (4) are kept, the smallest go first
    assert [b.nbytes // mib for b in st.free] == [3, 4, 5, 6]
    # a copy takes the smallest that fits, or a fresh one of 1 MiB or more
    assert st.take(int(4.5 * mib)).nbytes == 5 * mib
    assert st.take(7 * mib).nbytes == 7 * mib
    assert st.take(10).nbytes == 3 * mib
    assert [b.nbytes // mib for b in st.free] == [4, 6]
    st = fresh_staging()
    assert st.take(10).nbytes == mib
    # and no more than KEEP_BYTES (512 MiB) in all, unless one alone
    for n in (200, 200, 200):
        st.give(numpy.empty(n * mib, numpy.uint8))
    assert [b.nbytes // mib for b in st.free] == [200, 200]
    st.give(numpy.empty(600 * mib, numpy.uint8))
    assert [b.nbytes // mib for b in st.free] == [600]


@pytest.mark.parametrize("offset", [0, 1, 4, 16, 100])
def test_large_copies_at_any_alignment_arrive_bit_for_bit(offset):
    # 3 MiB and more is copied in pieces when the buffers are aligned
    # differently; every bit must still arrive, NaN payloads included
    raw = numpy.random.default_rng(offset).integers(
        0, 2**32, (3 << 18) + offset + 7, dtype=numpy.uint32)
    host = raw[offset:offset + (3 << 18) + 5].view(numpy.float32)
    dev = cp.asarray(host)
    back = dev.get()
    assert back.tobytes() == host.tobytes()
    out = numpy.empty(host.size + 3, numpy.float32)[3:]
    dev.get(out=out)
    assert out.tobytes() == host.tobytes()
    dev2 = cp.empty_like(dev)
    dev2.set(host)
    assert dev2.get().tobytes() == host.tobytes()


def test_a_large_copy_between_buffers_aligned_apart_goes_in_1_mib_pieces():
    """glibc's memcpy takes its slow non-temporal path for one large copy
    between buffers whose addresses differ by other than a multiple of 64
    bytes (the model's 256-byte aligned device memory against a NumPy
    array 16 bytes past a cache line): such a copy of 4 MiB is done in
    four 1 MiB pieces, one aligned alike in one call, as is a small one.
    (The real copy's speed is what a host wait lasts when it is slower
    than modelled.)"""
    src = numpy.arange(1 << 20, dtype=numpy.float32)         # 4 MiB
    raw = numpy.zeros(src.nbytes + 64, numpy.uint8)
    for shift, calls in ((0, 1), (16, 4), (1, 4)):
        off = (src.ctypes.data + shift - raw.ctypes.data) % 64
        dst = raw[off:off + src.nbytes].view(numpy.float32)
        assert (dst.ctypes.data - src.ctypes.data) % 64 == shift
        dst[:] = 0
        assert host_copy_calls(dst, src) == calls, shift
        assert numpy.array_equal(dst, src)
    small = raw[1:1 + (1 << 20)]
    assert host_copy_calls(small, numpy.ones(1 << 20, numpy.uint8)) == 1
