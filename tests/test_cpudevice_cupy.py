"""CuPy behaviours the CPU device model once got wrong (issue 17), each
checked against what CuPy 14 does (its source, and its documentation)."""
from unittest import mock

import numpy
import pytest

import src.cpudevice as cp
import src.cpudevice.cupyx as cpx
import modelkit
from modelkit import Gate

pool = cp.get_default_memory_pool()


# -- cupy.fuse with reductions ------------------------------------------------
def test_fuse_reduces_along_an_axis():
    @cp.fuse()
    def colsum(x, y):
        return cp.sum(x * 2 + y, axis=0)

    @cp.fuse
    def rowmax(x):
        return cp.max(x * x, axis=1, keepdims=True)

    @cp.fuse
    def total(x):
        return cp.sum(x - 1)

    host = numpy.arange(12.0).reshape(3, 4)
    x = cp.asarray(host)
    r = colsum(x, 1.0)
    assert r.shape == (4,)
    numpy.testing.assert_array_equal(r.get(), (host * 2 + 1).sum(axis=0))
    r = rowmax(x)
    assert r.shape == (3, 1)
    numpy.testing.assert_array_equal(r.get(), (host * host).max(1, keepdims=1))
    assert total(x).shape == () and float(total(x)) == (host - 1).sum()
    # a second call with the same signature reuses the cached result type
    numpy.testing.assert_array_equal(colsum(x + 1, 0.0).get(),
                                     ((host + 1) * 2).sum(axis=0))


# -- integer index arrays wrap ------------------------------------------------
def test_out_of_bounds_index_arrays_wrap_as_cupy_documents():
    x = cp.asarray(numpy.array([10.0, 11.0, 12.0]))
    assert x[cp.array([5])].get().tolist() == [12.0]
    assert x[cp.array([-4, -1, 3])].get().tolist() == [12.0, 12.0, 10.0]
    assert x[[7, -5]].get().tolist() == [11.0, 11.0]
    m = cp.asarray(numpy.arange(12).reshape(3, 4))
    assert m[cp.array([4]), cp.array([-5])].get().tolist() == [7]
    assert m[..., cp.array([5])].get().ravel().tolist() == [1, 5, 9]
    assert m[cp.array([True, False, True])].shape == (2, 4)   # masks: as is
    y = cp.zeros(3)
    y[cp.array([4])] = 1.0                    # scatter wraps too
    assert y.get().tolist() == [0.0, 1.0, 0.0]
    with pytest.raises(IndexError):           # a plain integer is checked
        x[5]


# -- errors at the call -------------------------------------------------------
def test_reductions_without_identity_raise_at_the_call():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)              # nothing on s can run yet
    try:
        with s:
            e0 = cp.zeros(0)
            with pytest.raises(ValueError, match="^zero-size array to "
                               "reduction operation CUPY_CUB_MAX which has "
                               "no identity$"):
                e0.max()
            with pytest.raises(ValueError, match="CUPY_CUB_ARGMIN"):
                cp.argmin(e0)
            with pytest.raises(ValueError, match="operation cupy_min which"):
                cp.zeros((0, 3)).min(axis=0)
            assert cp.zeros((3, 0)).max(axis=0).shape == (0,)
            assert cp.zeros((3, 0)).sum(axis=1).shape == (3,)
    finally:
        gate.open()
    s.synchronize()
    assert float(cp.zeros(0).sum()) == 0.0


def test_ufunc_refuses_a_python_list_or_none():
    x = cp.arange(2)
    for call in (lambda: cp.add([1, 2], x), lambda: x + [1, 2],
                 lambda: cp.multiply(x, (1, 2))):
        with pytest.raises(TypeError, match="Unsupported type <class"):
            call()
    with pytest.raises(TypeError, match="Unsupported type <class 'NoneType'>"):
        cp.add(x, None)
    assert (x + numpy.int64(1)).get().tolist() == [1, 2]     # scalars work


# -- views --------------------------------------------------------------------
def test_views_point_at_their_offset_and_know_their_base():
    x = cp.arange(10, dtype=cp.float64)
    assert x.base is None
    v = x[2:]
    assert v.data.ptr == x.data.ptr + 2 * x.itemsize
    assert v.base is x and v[1:].base is x
    assert v[1:].data.ptr == x.data.ptr + 3 * x.itemsize
    assert x[::-1].data.ptr == x.data.ptr + 9 * x.itemsize
    m = x.reshape(2, 5)
    assert m.base is x and m.data.ptr == x.data.ptr
    assert m.T.base is x and m[1].data.ptr == x.data.ptr + 5 * x.itemsize
    assert x.copy().base is None and (x + 1).base is None
    assert m.T.reshape(10).base is None          # a copy, not a view
    assert v.data.mem is x.data.mem


def test_allocations_are_256_byte_aligned():
    keep = [cp.empty(n, cp.uint8) for n in (1, 255, 256, 511, 513, 3000)]
    del keep[1::2]                               # split and reuse the blocks
    keep += [cp.empty(n, cp.uint8) for n in (7, 700, 70000)]
    for a in keep:
        assert a.data.ptr % 256 == 0, hex(a.data.ptr)
    assert cp.empty(0).data.ptr == 0


# -- OutOfMemoryError: CuPy's text, exactly -----------------------------------
def test_out_of_memory_error_text_is_cupys_own():
    cap = cp.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"]
    size = (cap + 1 + 511) // 512 * 512
    with pytest.raises(cp.cuda.memory.OutOfMemoryError) as e:
        cp.empty(cap + 1, cp.uint8)
    total = pool.total_bytes()
    assert str(e.value) == ("Out of memory allocating {:,} bytes "
                            "(allocated so far: {:,} bytes).".format(size,
                                                                     total))
    pool.set_limit(size=1 << 20)
    try:
        with pytest.raises(cp.cuda.memory.OutOfMemoryError) as e:
            cp.empty(2 << 20, cp.uint8)
        assert str(e.value) == (
            "Out of memory allocating 2,097,152 bytes (allocated so far: "
            "{:,} bytes, limit set to: 1,048,576 bytes).".format(
                pool.total_bytes()))
    finally:
        pool.set_limit(size=0)
    err = cp.cuda.memory.OutOfMemoryError(1000, -1)
    assert str(err) == "Out of memory allocating 1,000 bytes"
    assert isinstance(err, MemoryError)


# -- RawKernel arguments ------------------------------------------------------
@pytest.fixture
def raw_twin():
    from src import twins
    seen = []

    @twins.register("cupy_probe_raw")
    def _twin(grid, block, args, shared_mem=0):
        seen.append((grid, block, args))
    yield cp.RawKernel("extern \"C\" __global__ void f() {}",
                       "cupy_probe_raw"), seen
    modelkit.unregister_twin("cupy_probe_raw")


def test_raw_kernel_wants_tuples_for_grid_and_block(raw_twin):
    k, seen = raw_twin
    x = cp.zeros(4, cp.float32)
    with pytest.raises(TypeError, match=r"Argument 'grid' has incorrect "
                       r"type \(expected tuple, got int\)"):
        k(1, (32,), (x,))
    with pytest.raises(TypeError, match="Argument 'block'.*got list"):
        k((1,), [32], (x,))
    k((1,), (32,), [x, numpy.int32(4)])          # args: a list is fine
    k((1,), (32,), (x, numpy.array([4], numpy.int32)))   # size one: a value
    with pytest.raises(TypeError, match="Only numpy.ndarrays of size one"):
        k((1,), (32,), (numpy.zeros(3),))
    cp.cuda.Stream.null.synchronize()
    assert len(seen) == 2 and seen[1][2][1] == 4


def test_memory_pointer_plus_an_offset():
    x = cp.arange(6, dtype=cp.float64)
    p = x.data + 16
    assert isinstance(p, cp.cuda.MemoryPointer)
    assert p.ptr == x.data.ptr + 16 and p.mem is x.data.mem
    assert (16 + x.data).ptr == p.ptr and (p - 8).ptr == x.data.ptr + 8
    q = x.data + 0
    q += 24
    assert q.ptr == x.data.ptr + 24 and int(q) == q.ptr
    y = cp.ndarray((4,), cp.float64, memptr=x.data + 16)
    assert y.get().tolist() == [2.0, 3.0, 4.0, 5.0]


# -- float to int casts -------------------------------------------------------
def test_float_to_int_astype_follows_cupys_documented_results():
    # docs.cupy.dev "Differences between CuPy and NumPy", cast behaviour:
    # cupy.array([-1.]).astype(uint32) is 0, inf to int32 is 2147483647.
    # The GPU truncates toward zero and saturates; NaN becomes 0.
    src = numpy.array([-1.0, numpy.inf, -numpy.inf, numpy.nan, 2.9, -2.9,
                       1e20, -1e20], numpy.float32)
    x = cp.asarray(src)
    assert x.astype(cp.uint32).get().tolist() == \
        [0, 2**32 - 1, 0, 0, 2, 0, 2**32 - 1, 0]
    assert x.astype(cp.int32).get().tolist() == \
        [-1, 2**31 - 1, -2**31, 0, 2, -2, 2**31 - 1, -2**31]
    assert x.astype(cp.int64).get().tolist() == \
        [-1, 2**63 - 1, -2**63, 0, 2, -2, 2**63 - 1, -2**63]
    assert x.astype(cp.int8).get().tolist() == \
        [-1, 127, -128, 0, 2, -2, 127, -128]
    assert x.astype(cp.bool_).get().tolist() == [True] * 8
    assert cp.asarray(numpy.array([2**31 - 1.0])).astype(
        cp.int32).get().tolist() == [2**31 - 1]


# -- cupyx --------------------------------------------------------------------
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


def test_profiler_reads_get_elapsed_time_at_the_call():
    # CuPy's own test patches cupy.cuda.get_elapsed_time (in milliseconds)
    with mock.patch.object(cp.cuda, "get_elapsed_time", return_value=2500):
        r = cpx.profiler.benchmark(lambda: None, n_repeat=3, n_warmup=1)
    numpy.testing.assert_array_equal(r.gpu_times, [[2.5, 2.5, 2.5]])


# -- profiler units (issue 20): seconds, consistent, bounded by known work ----
def test_benchmark_times_are_seconds_matching_a_known_host_wait():
    import time
    nap = 0.02
    r = cpx.profiler.benchmark(time.sleep, (nap,), n_repeat=3, n_warmup=0)
    cpu, gpu = r.cpu_times, r.gpu_times[0]
    assert cpu.shape == gpu.shape == (3,)
    assert (cpu >= nap).all() and (cpu < 2.0).all()
    # the idle device's events are recorded before and after the nap, so the
    # device interval spans it: about the nap, in seconds, on a GPU too
    assert (gpu >= 0.5 * nap).all(), gpu
    assert (gpu <= cpu + 0.05).all(), (gpu, cpu)


def test_benchmark_gpu_times_bound_a_known_copy_both_ways():
    nbytes = 32 << 20
    src = cpx.empty_pinned(nbytes // 4, numpy.float32)
    src[...] = 1.0
    dst = cp.empty(nbytes // 4, cp.float32)

    def copy():
        dst.set(src)
        cp.cuda.get_current_stream().synchronize()
    r = cpx.profiler.benchmark(copy, n_repeat=3, n_warmup=1)
    cpu, gpu = r.cpu_times, r.gpu_times[0]
    # 32 MiB takes ~0.7 ms at an H100's 50 GB/s and well under a second on
    # any CPU: a time in milliseconds or microseconds would miss these bounds
    assert (gpu > 2e-5).all() and (gpu < 2.0).all(), gpu
    assert (cpu > 2e-5).all() and (cpu < 2.0).all(), cpu
    # the function waits for its copy, so host and device intervals agree
    assert (gpu <= cpu + 0.05).all() and gpu.mean() >= 0.3 * cpu.mean(), \
        (gpu, cpu)
    assert str(r).count(" us") >= 2


def test_more_errors_are_raised_at_the_call():
    s = cp.cuda.Stream(non_blocking=True)
    gate = Gate().hold_stream(s)
    try:
        with s:
            x = cp.zeros(3)
            with pytest.raises(ValueError, match="could not convert"):
                x.fill("a")                    # converted at the call
            with pytest.raises(ValueError, match="non-scalar"):
                x.fill(numpy.ones(2))
            with pytest.raises(ValueError, match="num<0"):
                cp.linspace(0, 1, -1)
            with pytest.raises(TypeError, match="Unsupported type"):
                cp.where(x > 0, [1, 2, 3], 0)
            z = cp.ones(3, cp.complex64).astype(cp.int32)   # .real, silently
    finally:
        gate.open()
    s.synchronize()
    assert z.get().tolist() == [1, 1, 1]
    i = cp.zeros(2, cp.int32)
    i.fill(cp.array(2.7))
    assert i.get().tolist() == [2, 2]
