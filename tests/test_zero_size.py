"""Zero-size arrays are ordinary in NumPy and CuPy code (issue 20): creation,
arithmetic, reductions (with CuPy's errors, raised at the call), copies and
the memory pool all take them."""
import numpy
import pytest

import src.cpudevice as cp

pool = cp.get_default_memory_pool()


@pytest.mark.parametrize("make, shape, dtype", [
    (lambda: cp.empty(0), (0,), numpy.float64),
    (lambda: cp.zeros((3, 0)), (3, 0), numpy.float64),
    (lambda: cp.ones((0,), dtype=cp.int32), (0,), numpy.int32),
    (lambda: cp.full((0, 2), 5, dtype=cp.float32), (0, 2), numpy.float32),
    (lambda: cp.empty_like(cp.zeros((2, 0, 3))), (2, 0, 3), numpy.float64),
    (lambda: cp.zeros_like(cp.empty(0, cp.uint8)), (0,), numpy.uint8),
    (lambda: cp.arange(0), (0,), numpy.int64),
    (lambda: cp.arange(5, 2), (0,), numpy.int64),
    (lambda: cp.linspace(0, 1, 0), (0,), numpy.float64),
    (lambda: cp.ndarray((0, 4), cp.float32), (0, 4), numpy.float32),
    (lambda: cp.asarray(numpy.zeros((0, 3), numpy.int16)), (0, 3),
     numpy.int16),
    (lambda: cp.empty(4)[4:], (0,), numpy.float64),
    (lambda: cp.empty((2, 3))[:, 3:], (2, 0), numpy.float64),
])
def test_creation(make, shape, dtype):
    a = make()
    assert a.shape == shape and a.dtype == dtype
    assert a.size == 0 and a.nbytes == 0
    assert a.get().shape == shape


def test_negative_dimensions_are_still_refused():
    for shape in (-1, (3, -1)):
        with pytest.raises(ValueError, match="negative dimensions"):
            cp.empty(shape)


def test_arithmetic_and_broadcasting():
    x = cp.zeros((3, 0))
    assert (x + 1).shape == (3, 0)
    assert (x * cp.ones((1, 0))).shape == (3, 0)
    assert (x + cp.ones(0)).shape == (3, 0)
    assert cp.sin(cp.empty(0, cp.float32)).dtype == numpy.float32
    out = cp.empty((3, 0))
    assert cp.add(x, x, out=out) is out
    assert (cp.empty(0) > 0).dtype == numpy.bool_
    assert x.T.shape == (0, 3) and x.reshape(0, 3).shape == (0, 3)
    assert x.reshape(-1).shape == (0,)
    assert cp.matmul(cp.ones((2, 0)), cp.ones((0, 3))).get().tolist() == \
        [[0.0] * 3] * 2


def test_reductions_give_identities_or_cupys_error_at_the_call():
    assert float(cp.empty(0).sum()) == 0.0
    assert float(cp.ones((0,), dtype=cp.int32).prod()) == 1
    assert cp.zeros((3, 0)).sum(axis=1).get().tolist() == [0.0] * 3
    assert cp.zeros((3, 0)).sum(axis=0).shape == (0,)
    assert bool(cp.empty(0, cp.bool_).all()) is True
    assert bool(cp.empty(0, cp.bool_).any()) is False
    for reduce in (cp.max, cp.min, cp.argmax, cp.argmin,
                   lambda a: a.max(axis=0)):
        with pytest.raises(ValueError, match="^zero-size array to reduction "
                           "operation .* which has no identity$"):
            reduce(cp.zeros((0, 2)))
    assert cp.zeros((2, 0)).max(axis=0).shape == (0,)


def test_copies_both_ways():
    host = numpy.zeros((0, 3), numpy.float32)
    d = cp.asarray(host)
    back = d.get()
    assert back.shape == (0, 3) and back.dtype == numpy.float32
    out = numpy.empty((0, 3), numpy.float32)
    assert cp.asnumpy(d, out=out) is out
    d.set(numpy.ones((0, 3), numpy.float32))
    assert d.copy().shape == (0, 3)
    assert d.astype(cp.int8).dtype == numpy.int8
    e = cp.empty((0, 3), cp.float32)
    e[...] = d
    e[:] = 1.0
    assert cp.array(d, copy=True).shape == (0, 3)
    assert cp.ascontiguousarray(d.T).shape == (3, 0)
    assert cp.empty(0).tolist() == []
    assert repr(cp.empty(0)) == "array([], dtype=float64)"


def test_the_pool_takes_no_memory_for_them():
    cp.cuda.Stream.null.synchronize()
    used, free_blocks = pool.used_bytes(), pool.n_free_blocks()
    keep = [cp.empty(0), cp.zeros((3, 0)), cp.ones((0,), dtype=cp.int32)]
    assert pool.used_bytes() == used
    assert all(a.data.ptr == 0 for a in keep)
    del keep
    assert pool.used_bytes() == used and pool.n_free_blocks() == free_blocks
    p = pool.malloc(0)
    assert p.ptr == 0 and p.mem.size == 0
    x = cp.empty(100)             # and ordinary allocations go on as before
    assert pool.used_bytes() == used + 1024 and x.data.ptr % 256 == 0


def test_mean_var_std_of_nothing_are_nan_without_a_warning():
    # CuPy's kernels divide by zero; NumPy would also warn (an error here)
    assert numpy.isnan(float(cp.empty(0).mean()))
    assert numpy.isnan(cp.zeros((0, 3)).mean(axis=0).get()).all()
    assert numpy.isnan(cp.zeros((2, 0)).var(axis=1).get()).all()
    assert numpy.isnan(float(cp.empty(0, cp.float32).std()))
    assert cp.empty(0, cp.float32).mean().dtype == numpy.float32
    assert numpy.isnan(float(cp.ones(1).var(ddof=1)))
    assert float(cp.arange(4.0).std(ddof=4)) == numpy.inf
    assert float(cp.arange(5.0).var()) == 2.0
