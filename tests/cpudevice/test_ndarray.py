"""Arrays on the CPU device model (`cupy.ndarray` and the routines): they
match NumPy, views share memory, errors are raised at the call as in CuPy,
and zero-size arrays (issue 20) are ordinary: creation, arithmetic,
reductions, copies and the memory pool all take them."""
import numpy
import numpy as np
import pytest

import src.cpudevice as cp
from modelkit import Gate

pool = cp.get_default_memory_pool()


def test_array_operations_match_numpy():
    rng = numpy.random.default_rng(0)
    a, b = rng.random((4, 5)), rng.random((5, 3))
    x, y = cp.asarray(a), cp.asarray(b)
    numpy.testing.assert_allclose((x @ y).get(), a @ b)
    numpy.testing.assert_allclose(cp.sqrt(x * 2 + 1).get(),
                                  numpy.sqrt(a * 2 + 1))
    numpy.testing.assert_allclose(x.sum(axis=0).get(), a.sum(axis=0))
    assert float(x.max()) == a.max() and int(x.argmax()) == a.argmax()
    numpy.testing.assert_allclose(x.T.copy().get(), a.T)
    numpy.testing.assert_array_equal(x.astype(cp.float32).get(),
                                     a.astype(numpy.float32))
    x += 1
    numpy.testing.assert_allclose(x.get(), a + 1)
    numpy.testing.assert_array_equal(cp.arange(5).get(), numpy.arange(5))
    numpy.testing.assert_allclose(cp.linspace(0, 1, 5).get(),
                                  numpy.linspace(0, 1, 5))
    assert cp.zeros((2, 3), cp.int32).get().tolist() == [[0] * 3] * 2


def test_views_share_memory_and_fill_writes_through():
    x = cp.zeros(6)
    v = x[2:4]
    v.fill(5)
    assert x.get().tolist() == [0, 0, 5, 5, 0, 0]
    r = x.reshape(2, 3)
    r[1, :] = 7
    assert x.get().tolist() == [0, 0, 5, 7, 7, 7]


def test_seeded_random_is_reproducible():
    cp.random.seed(1)
    a = cp.random.rand(5).get()
    cp.random.seed(1)
    b = cp.random.rand(5).get()
    assert (a == b).all() and not (a == cp.random.rand(5).get()).all()
    g1, g2 = cp.random.default_rng(3), cp.random.default_rng(3)
    assert (g1.standard_normal(4).get() == g2.standard_normal(4).get()).all()


def test_random_integers_with_one_bound_draw_from_zero_up_to_it():
    g = cp.random.default_rng(5)
    x = g.integers(3, size=300).get()
    assert x.dtype == numpy.int64 and set(x.tolist()) == {0, 1, 2}
    y = g.integers(2, 4, size=300, endpoint=True).get()
    assert set(y.tolist()) == {2, 3, 4}
    z = cp.random.randint(3, size=300).get()
    assert set(z.tolist()) == {0, 1, 2}


def test_host_errors_are_raised_at_the_call():
    with pytest.raises(ValueError, match="could not be broadcast"):
        cp.ones(3) + cp.ones(4)
    x = cp.ones(3, cp.float32)
    with pytest.raises(TypeError, match="float64 array cannot be set"):
        x.set(numpy.ones(3))
    with pytest.raises(ValueError, match="Shape mismatch"):
        x.set(numpy.ones(4, numpy.float32))
    with pytest.raises(ValueError, match="Shape mismatch"):
        x.get(out=numpy.empty(4, numpy.float32))
    with pytest.raises(ValueError, match="negative dimensions"):
        cp.empty(-1)
    with pytest.raises(TypeError, match="Unsupported type"):
        x + numpy.ones(3, numpy.float32)


def test_where_chooses_elementwise_and_keeps_the_dtype():
    x = cp.arange(6, dtype=cp.float32)
    r = cp.where(x > 2, x, cp.zeros(6, cp.float32))
    assert r.dtype == numpy.float32
    assert r.get().tolist() == [0, 0, 0, 3, 4, 5]
    assert cp.where(x < 1, 1.0, x).get().tolist() == [1, 1, 2, 3, 4, 5]


def test_array_equal_and_allclose_take_cupys_parameters():
    import inspect
    x = cp.asarray([1.0, 2.0])
    assert bool(cp.array_equal(x, x)) and not bool(cp.array_equal(x, x + 1))
    assert not bool(cp.array_equal(x, cp.asarray([1.0, 2.0, 3.0])))
    assert bool(cp.allclose(x, x + 1e-9)) and not bool(cp.allclose(x, x + 1))
    # CuPy's signatures (cupy/_logic/comparison.py), defaults included
    assert str(inspect.signature(cp.array_equal)) == \
        "(a1, a2, equal_nan=False)"
    assert str(inspect.signature(cp.allclose)) == \
        "(a, b, rtol=1e-05, atol=1e-08, equal_nan=False)"


def test_array_equal_with_equal_nan_matches_nans_in_the_same_places():
    a = cp.asarray(numpy.array([1.0, numpy.nan]))
    b = cp.asarray(numpy.array([1.0, numpy.nan]))
    c = cp.asarray(numpy.array([numpy.nan, 1.0]))
    assert not bool(cp.array_equal(a, b))               # NaN != NaN
    assert bool(cp.array_equal(a, b, equal_nan=True))
    assert not bool(cp.array_equal(a, c, equal_nan=True))
    assert bool(cp.array_equal(cp.arange(3), cp.arange(3), equal_nan=True))


def test_get_gives_the_layout_asked_for():
    x = cp.asarray(numpy.arange(6.0).reshape(2, 3))
    c, f = x.get(), x.get(order="F")
    assert c.flags.c_contiguous and not c.flags.f_contiguous
    assert f.flags.f_contiguous and not f.flags.c_contiguous
    assert c.tolist() == f.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_implicit_conversion_to_numpy_raises_type_error_as_in_cupy():
    x = cp.arange(3)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy"):
        np.asarray(x)


def test_len_and_format_are_numpys():
    assert len(cp.zeros((3, 2))) == 3
    with pytest.raises(TypeError, match="unsized"):
        len(cp.asarray(1.0))
    assert f"{cp.asarray(2.5):.2f}" == "2.50"       # 0-d: as its value
    assert f"{cp.arange(3)}" == str(numpy.arange(3))


@pytest.mark.parametrize("shape", [(4,), (0, 6), (6, 0)])
def test_a_reshape_to_another_size_gives_cupys_error(shape):
    # CuPy's words, the shape as a tuple ("(0, 6)"; NumPy writes "(0,6)")
    with pytest.raises(ValueError) as e:
        cp.ones((2, 3)).reshape(shape)
    assert str(e.value) == f"cannot reshape array of size 6 into shape {shape}"


def test_array_of_device_arrays_still_builds_a_device_array():
    out = cp.array([cp.arange(2), cp.arange(2) + 2])
    assert isinstance(out, cp.ndarray)
    assert out.get().tolist() == [[0, 1], [2, 3]]


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


NDMIN_INPUTS = [7.5, [1, 2, 3], [[1, 2, 3], [4, 5, 6]],
                numpy.arange(6).reshape(2, 1, 3)]


@pytest.mark.parametrize("ndmin", [0, 1, 2, 3, 5])
@pytest.mark.parametrize("obj", NDMIN_INPUTS, ids=["0d", "1d", "2d", "3d"])
def test_array_ndmin_gives_numpys_shape(obj, ndmin):
    """``cp.array(obj, ndmin=n)`` prepends ones to the shape up to ``n``
    dimensions and never drops any, as numpy.array (CuPy's semantics): below,
    at and above the input's ``ndim``; from the host and from the device."""
    want = numpy.array(obj, ndmin=ndmin)
    got = cp.array(obj, ndmin=ndmin)
    assert got.shape == want.shape and got.ndim == max(ndmin, numpy.ndim(obj))
    numpy.testing.assert_array_equal(got.get(), want)
    for copy in (True, False):
        d = cp.array(obj)
        got = cp.array(d, copy=copy, ndmin=ndmin)
        assert got.shape == want.shape
        numpy.testing.assert_array_equal(got.get(), want)
        assert d.shape == numpy.shape(obj)      # the source keeps its shape
