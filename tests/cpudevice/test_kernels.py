"""Kernels on the CPU device model: a reader's own ElementwiseKernel /
ReductionKernel in plain C runs without a twin, with CUDA C's semantics
(float32 stays float32, integer division truncates, comparisons give bool,
float-to-int conversions saturate; each expected value is NumPy written the
CUDA way); RawKernel arguments and `cupy.fuse` reductions follow CuPy."""
import fractions
import math

import numpy
import pytest

import modelkit
import src.cpudevice as cp
from src import twins


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


f32, f64, i32, u32 = numpy.float32, numpy.float64, numpy.int32, numpy.uint32
XF = numpy.array([-2.75, -1.5, -0.25, 0.0, 0.5, 1.25, 2.5, 3.75], f32)
XI = numpy.array([-7, -5, -3, -1, 0, 2, 5, 7], i32)
YI = numpy.array([2, 3, -2, 4, 5, -3, 2, 3], i32)


def _cdiv(a, b):       # C's integer division: truncate toward zero
    q = numpy.abs(a) // numpy.abs(b)
    return numpy.where((a < 0) != (b < 0), -q, q).astype(a.dtype)


def _crem(a, b):       # C's %: the sign of the dividend
    return (a - _cdiv(a, b) * b).astype(a.dtype)


def _sat_int32(v):
    v = numpy.trunc(v.astype(f64))
    v = numpy.where(numpy.isnan(v), 0, v)
    return numpy.clip(v, -2**31, 2**31 - 1).astype(i32)


CASES = [
    ("y = x * 3 + 1", "T y", (XF,), XF * f32(3) + f32(1)),
    ("y = -x / 4", "T y", (XF,), -XF / f32(4)),
    # float32 arithmetic is float32: 1e-8f is lost beside 1.0f ...
    ("y = (x + 1e-8f) - x", "T y", (XF + f32(1),),
     (XF + f32(1) + f32(1e-8)) - (XF + f32(1))),
    # ... while 1e-8 is a double literal, so the sum is double
    ("y = (x + 1e-8) - x", "T y", (XF + f32(1),),
     ((XF + f32(1)).astype(f64) + 1e-8 - (XF + f32(1))).astype(f32)),
    ("y = sinf(x) * cosf(x)", "T y", (XF,), numpy.sin(XF) * numpy.cos(XF)),
    ("y = expf(-x * x)", "T y", (XF,), numpy.exp(-XF * XF)),
    ("y = sqrtf(fabsf(x))", "T y", (XF,), numpy.sqrt(numpy.abs(XF))),
    ("y = powf(x, 2.0f) + fminf(x, 1.0f)", "T y", (XF,),
     numpy.power(XF, f32(2)) + numpy.fmin(XF, f32(1))),
    ("y = max(x, 0.0f)", "T y", (XF,), numpy.fmax(XF, f32(0))),
    ("y = x > 0 ? log(x + 1) : -x", "T y", (XF,),
     numpy.where(XF > 0, numpy.log(numpy.abs(XF) + f32(1)), -XF)),
    ("y = exp(x) - 1", "float64 y", (XF.astype(f64),),
     numpy.exp(XF.astype(f64)) - 1),
    ("T t = x * 2; y = t + 1;", "T y", (XF,), XF * f32(2) + f32(1)),
    ("float a = x, b = a * a; double c = b; y = c / 3;", "T y", (XF,),
     ((XF * XF).astype(f64) / 3).astype(f32)),
    ("y = (float)(int)x", "T y", (XF,), numpy.trunc(XF)),
    ("y = x < 1 && x > -1", "bool y", (XF,), (XF < 1) & (XF > -1)),
    ("y = (x > 0) + (x > 1) + !x", "int32 y", (XF,),
     ((XF > 0).astype(i32) + (XF > 1) + (XF == 0))),
    ("y = x / w", "T y", (XI, YI), _cdiv(XI, YI)),
    ("y = x % w", "T y", (XI, YI), _crem(XI, YI)),
    ("y = x * 1000000", "T y", (XI * 1000,),
     (XI.astype(numpy.int64) * 1000 * 1000000).astype(i32)),   # wraps
    ("unsigned int u = x; y = u > 5u", "bool y", (XI,),
     XI.astype(u32) > 5),
    ("y = (x << 2) ^ (x >> 1) | 1", "T y", (XI,),
     ((XI << 2) ^ (XI >> 1)) | 1),
    ("if (x < 0) y = -x; else { T t = x; y = t * 2; }", "T y", (XI,),
     numpy.where(XI < 0, -XI, XI * 2)),
    ("y = static_cast<int>(x * 1e10f)", "int32 y", (XF,),
     _sat_int32(XF * f32(1e10))),
    ("y = isnan(x) ? 0.0f : copysignf(fabsf(x), -1.0f) + M_PI", "T y", (XF,),
     (-numpy.abs(XF)).astype(f64) + numpy.pi),
    ("y = +x - -x", "T y", (XI,), XI * 2),
    ("const float h = x * 0.5f; const T t = h; y = t", "T y", (XF,), XF / 2),
    # int against unsigned int: the int converts to unsigned (C11 6.3.1.8),
    # so -1 < 1u is false and -7 / 2u is (2**32 - 7) / 2 ...
    ("y = x < 1u", "bool y", (XI,), XI.astype(numpy.int64) % 2**32 < 1),
    ("y = x / 2u", "uint32 y", (XI,), (XI.astype(numpy.int64) % 2**32) // 2),
    # ... while long long holds every unsigned int: the sum is long long
    ("y = (long long)x + 1u", "int64 y", (XI,), XI.astype(numpy.int64) + 1),
    # 1L and 1ll are 64 bits (CUDA's long is 64 bits on Linux), so shifting
    # by 40 is defined; 2147483648 does not fit an int: it is a long
    ("y = (1L << 40) + (1ll << 33) + 2147483648 + x", "int64 y", (XI,),
     XI.astype(numpy.int64) + 2**40 + 2**33 + 2**31),
]


def test_a_fused_function_is_named_as_in_cupy():
    def scaled(x):
        """Twice x."""
        return x * 2

    plain, named = cp.fuse(scaled), cp.fuse(kernel_name="twice")(scaled)
    assert plain.__name__ == plain.name == "scaled"
    assert plain.__doc__ == "Twice x."
    assert named.name == "twice"            # CuPy's Fusion.name
    assert named.__name__ == "scaled"       # functools.update_wrapper's
    assert named(cp.arange(3)).get().tolist() == [0, 2, 4]


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


def test_a_fused_body_that_picks_one_element_gives_a_0d_array():
    # CuPy's fusion indexes an array (_ArrayProxy.__getitem__): x[-1] of a
    # vector is one element, not a vector of its shape
    r = cp.fuse(lambda x: x[-1] * 2)(cp.arange(4.0))
    assert r.shape == () and float(r) == 6.0


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


def test_the_issues_example_gives_cupys_result():
    r = cp.ElementwiseKernel("T x", "T y", "y = x * 3 + 1", "k")(
        cp.arange(5, dtype=cp.float32))
    assert r.dtype == numpy.float32
    numpy.testing.assert_array_equal(r.get(), [1, 4, 7, 10, 13])


@pytest.mark.parametrize("op, out, args, expected", CASES,
                         ids=[c[0] for c in CASES])
def test_plain_c_follows_cuda_semantics(op, out, args, expected):
    names = "xw"[:len(args)]
    k = cp.ElementwiseKernel(", ".join(f"T {n}" for n in names), out, op,
                             "ck_case")
    r = k(*[cp.asarray(a) for a in args])
    expected = numpy.asarray(expected)
    if out.startswith("T"):
        assert r.dtype == args[0].dtype
    else:
        assert r.dtype == numpy.dtype(out.split()[0])
    numpy.testing.assert_allclose(r.get(), expected.astype(r.dtype),
                                  rtol=2e-7 if r.dtype == f32 else 1e-15,
                                  atol=0)


def test_at_least_twenty_expressions_are_tested():
    assert len(CASES) >= 20


def test_scalars_outputs_given_and_the_element_index():
    k = cp.ElementwiseKernel("T x, float32 s", "T y",
                             "y = x * s + i", "ck_scalar")
    r = k(cp.arange(4, dtype=cp.float32), 2.5)
    numpy.testing.assert_array_equal(r.get(), numpy.arange(4) * 2.5 +
                                     numpy.arange(4))
    out = cp.full(4, 10.0, cp.float32)
    acc = cp.ElementwiseKernel("T x", "T y", "y += x", "ck_acc")
    assert acc(cp.ones(4, cp.float32), out) is out
    numpy.testing.assert_array_equal(out.get(), [11] * 4)
    rev = cp.ElementwiseKernel("raw T x", "T y",
                               "y = x[_ind.size() - i - 1]", "ck_rev")
    numpy.testing.assert_array_equal(
        rev(cp.arange(5.0), cp.empty(5)).get(), [4, 3, 2, 1, 0])


def test_float_to_int_conversion_saturates_like_the_gpu():
    x = cp.asarray(numpy.array([numpy.nan, numpy.inf, -numpy.inf, -1.5,
                                3e9, -3e9, 2.9], f32))
    r = cp.ElementwiseKernel("T x", "int32 y", "y = x", "ck_sat")(x).get()
    assert r.tolist() == [0, 2**31 - 1, -2**31, -1, 2**31 - 1, -2**31, 2]
    u = cp.ElementwiseKernel("T x", "uint32 y", "y = x", "ck_satu")(x).get()
    assert u.tolist() == [0, 2**32 - 1, 0, 0, 3000000000, 0, 2]


def test_reduction_kernels_run_from_their_expressions():
    host = numpy.arange(12, dtype=f32).reshape(3, 4) - 5
    x = cp.asarray(host)
    l2 = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = sqrt(a)",
                            "0", "ck_l2")
    numpy.testing.assert_allclose(l2(x).get(), numpy.sqrt((host ** 2).sum()),
                                  rtol=1e-6)
    r = l2(x, axis=1)
    assert r.dtype == f32 and r.shape == (3,)
    numpy.testing.assert_allclose(r.get(), numpy.sqrt((host ** 2).sum(1)),
                                  rtol=1e-6)
    assert l2(x, axis=0, keepdims=True).shape == (1, 4)
    mx = cp.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a",
                            "-INFINITY", "ck_max")
    numpy.testing.assert_array_equal(mx(x, axis=0).get(), host.max(0))
    cnt = cp.ReductionKernel("T x", "int64 y", "x > 0", "a + b", "y = a",
                             "0", "ck_count", reduce_type="long long")
    assert int(cnt(x)) == int((host > 0).sum())
    sel = cp.ReductionKernel("T x", "T y", "x", "a < b ? a : b", "y = a * 2",
                             "CUDART_INF_F", "ck_min2")
    assert float(sel(x[:, 1:])) == 2 * host[:, 1:].min()
    # an odd length and an empty reduction (which gives the identity)
    assert float(l2(cp.ones(7, cp.float32))) == pytest.approx(7 ** 0.5)
    assert float(l2(cp.zeros(0, cp.float32))) == 0.0


def test_reduction_kernel_broadcasts_its_inputs_like_cupy():
    dot = cp.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a",
                             "0", "ck_dot")
    row = numpy.arange(4, dtype=f32)
    grid = numpy.arange(12, dtype=f32).reshape(3, 4)
    for args in [(row, grid), (grid, row)]:      # either one broadcast
        x, w = (cp.asarray(a) for a in args)
        assert float(dot(x, w)) == float((row * grid).sum())
        numpy.testing.assert_array_equal(dot(x, w, axis=1).get(),
                                         (row * grid).sum(axis=1))
    # a scalar argument, even the first, takes every element's shape
    scaled = cp.ReductionKernel("T s, T x", "T y", "s * x", "a + b", "y = a",
                                "0", "ck_scaled_sum")
    numpy.testing.assert_array_equal(
        scaled(f32(2), cp.asarray(grid), axis=0).get(), 2 * grid.sum(axis=0))


def test_reduction_expressions_must_be_one_expression():
    k = cp.ReductionKernel("T x", "T y", "x x", "a + b", "y = a", "0",
                           "ck_two")
    with pytest.raises(NotImplementedError, match="unexpected text after "
                       "the expression at 'x"):
        k(cp.ones(3))


def test_reduction_without_identity_refuses_empty_input_at_the_call():
    k = cp.ReductionKernel("T x", "T y", "x", "max(a, b)", "y = a", None,
                           "ck_noid")
    assert float(k(cp.arange(5.0))) == 4.0
    with pytest.raises(ValueError, match="zero-size array to reduction "
                       "operation ck_noid which has no identity"):
        k(cp.zeros((2, 0)))              # raised here, not at a later sync
    assert k(cp.zeros((0, 3)), axis=1).shape == (0,)


def test_reduction_kernel_writes_into_an_out_of_the_reduced_shape():
    k = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a", "0",
                           "ck_sum_out")
    x = cp.asarray(numpy.arange(12, dtype=f32).reshape(3, 4))
    out = cp.empty(3, f32)
    assert k(x, axis=1, out=out) is out
    assert out.get().tolist() == [6.0, 22.0, 38.0]
    with pytest.raises(ValueError, match="Out shape is mismatched"):
        k(x, axis=1, out=cp.empty(4, f32))


def test_limits_of_the_c_headers_have_their_values():
    k = cp.ElementwiseKernel(
        "T x", "int64 a, int64 b, int32 c, int32 d, uint32 e",
        "a = LLONG_MAX; b = LLONG_MIN; c = INT_MAX; d = INT_MIN; "
        "e = UINT_MAX", "ck_limits")
    got = [int(v.get()[0]) for v in k(cp.zeros(1, f32))]
    assert got == [2**63 - 1, -2**63, 2**31 - 1, -2**31, 2**32 - 1]


def test_a_registered_twin_wins_over_the_translation():
    calls = []

    @twins.register("ck_twin_wins")
    def _twin(x, y):
        calls.append(1)
        y[...] = 42
    try:
        k = cp.ElementwiseKernel("T x", "T y", "y = x", "ck_twin_wins")
        assert k(cp.ones(3)).get().tolist() == [42, 42, 42]
        assert calls
    finally:
        modelkit.unregister_twin("ck_twin_wins")


def test_raw_kernel_without_twin_keeps_its_error():
    k = cp.RawKernel("extern \"C\" __global__ void f(float *x) {}", "ck_raw")
    with pytest.raises(NotImplementedError, match="has no NumPy twin"):
        k((1,), (1,), (cp.ones(1),))


@pytest.mark.parametrize("op, what", [
    ("for (int j = 0; j < 3; j++) y += x", "a `for` loop"),
    ("while (x > 0) y = x", "a `while` loop"),
    ("y = x; return", "`return`"),
    ("y = foo(x)", "the function foo()"),
    ("y = *x", "expected an expression"),
    ("y = x->z", "'->'"),
    ("y[i] = x", "a write to a raw array"),
    ("y = x[0]", "indexing 'x' (only raw parameters"),
    ("y = z[0]", "indexing 'z' (only raw parameters"),
    ("#define N 3\ny = x", "the token '#'"),
    ('y = "a"', "the token '\"'"),
    ("y = x x + 1 + 2 + 3", "expected ';' at 'x + 1 + 2 +"),   # where
])
def test_code_outside_the_grammar_names_what_and_points_to_twins(op, what):
    k = cp.ElementwiseKernel("T x", "raw T y" if "y[" in op else "T y", op,
                             "ck_bad")
    with pytest.raises(NotImplementedError) as e:
        k(cp.ones(3), cp.ones(3))
    assert what in str(e.value)
    assert "src.twins.register('ck_bad')" in str(e.value)


def test_a_preamble_needs_a_twin():
    k = cp.ElementwiseKernel("T x", "T y", "y = f(x)", "ck_pre",
                             preamble="__device__ float f(float a) "
                             "{ return a; }")
    with pytest.raises(NotImplementedError, match="preamble"):
        k(cp.ones(3))


@pytest.mark.parametrize("op, what", [
    ("y = z + x", "'z' is undefined"),
    ("y = x % 2.0f", "binary %"),
    ("x = 1; y = x", "read-only"),
    ("y = sinf(x, x)", "takes 1 argument"),
    # the statement of an if is a scope of its own (C11 6.8.4p3)
    ("if (x > 0) float t = x; y = t", "'t' is undefined"),
])
def test_invalid_c_raises_value_error_at_the_call(op, what):
    k = cp.ElementwiseKernel("T x", "T y", op, "ck_invalid")
    with pytest.raises(ValueError, match=what):
        k(cp.ones(3, cp.float32))


def test_literals_follow_c():
    k = cp.ElementwiseKernel("T x", "uint32 y", "y = 0x10 + 010 + 1u + x",
                             "ck_lit")
    assert k(cp.zeros(1, cp.int32)).get().tolist() == [25]
    k = cp.ElementwiseKernel("T x", "T y", "y = 3 / 2 + 3 / 2.0f + x",
                             "ck_lit2")
    assert k(cp.zeros(1, cp.float32)).get().tolist() == [2.5]
    k = cp.ElementwiseKernel("T x", "T y", "y = -x", "ck_lit3")
    assert k(cp.ones(1, cp.uint32)).get().tolist() == [2**32 - 1]


def test_translation_is_cached_per_type_signature():
    k = cp.ElementwiseKernel("T x", "T y", "y = x + 1", "ck_cache")
    k(cp.ones(3, cp.float32))
    k(cp.ones(3, cp.float32))
    k(cp.ones(3, cp.int32))
    assert modelkit.translated_variants(k) == 2
    assert k(cp.ones(3, cp.int32)).dtype == numpy.int32


# -- every math function of the grammar, against C's definitions -----------
# Each expected value is worked out in Python's `math` (correctly rounded or
# nearly, in double) and rounded to the kernel's type; CUDA's functions are
# within a few ULP of it (its programming guide's tables: at most 4 ULP for
# these), hence rtol 5e-7 for float (4 ULP of 2**-23) and 1e-15 for double.
U = [0.125, 0.3, 0.5, 0.7, 0.875]
HALVES = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.7, -2.7]


def _round_away(v):     # C's round(): halfway cases away from zero
    return math.copysign(math.floor(abs(v) + 0.5), v)


def _fmin(a, b):        # C's fmin/fmax: a NaN argument is ignored
    return b if math.isnan(a) else a if math.isnan(b) else min(a, b)


def _fmax(a, b):
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


def _exact_fma(a, b, c):   # one rounding, of the exact a * b + c
    return float(fractions.Fraction(a) * fractions.Fraction(b)
                 + fractions.Fraction(c))


NAN = float("nan")
MATH = [   # name, reference, arguments (one list per argument)
    ("sin", math.sin, [U]), ("cos", math.cos, [U]), ("tan", math.tan, [U]),
    ("asin", math.asin, [U]), ("acos", math.acos, [U]),
    ("atan", math.atan, [U]), ("sinh", math.sinh, [U]),
    ("cosh", math.cosh, [U]), ("tanh", math.tanh, [U]),
    ("asinh", math.asinh, [U]), ("acosh", math.acosh, [[1 + u for u in U]]),
    ("atanh", math.atanh, [U]), ("exp", math.exp, [U]),
    ("exp2", math.exp2, [U]), ("exp10", lambda v: 10.0 ** v, [U]),
    ("expm1", math.expm1, [U]), ("log", math.log, [U]),
    ("log2", math.log2, [U]), ("log10", math.log10, [U]),
    ("log1p", math.log1p, [U]), ("sqrt", math.sqrt, [U]),
    ("rsqrt", lambda v: 1 / math.sqrt(v), [U]), ("cbrt", math.cbrt, [U]),
    ("fabs", math.fabs, [HALVES]), ("floor", math.floor, [HALVES]),
    ("ceil", math.ceil, [HALVES]), ("trunc", math.trunc, [HALVES]),
    ("round", _round_away, [HALVES]),
    ("rint", round, [HALVES]),            # to nearest, ties to even
    ("nearbyint", round, [HALVES]),
    ("pow", math.pow, [U, [1.5 + u for u in U]]),
    ("fmod", math.fmod, [[-7 * u for u in U], [u + 0.25 for u in U]]),
    ("fmin", _fmin, [[NAN] + U[1:], [0.5] * 5]),
    ("fmax", _fmax, [[NAN] + U[1:], [0.5] * 5]),
    ("atan2", math.atan2, [[u - 1 for u in U], U]),
    ("hypot", math.hypot, [U, [1 - u for u in U]]),
    ("copysign", math.copysign, [U, [-1, 1, -1, 1, -1]]),
    ("fma", _exact_fma, [U, [3.0 + u for u in U], [-1.0] * 5]),
]


@pytest.mark.parametrize("name, ref, args", MATH, ids=[m[0] for m in MATH])
@pytest.mark.parametrize("dtype", [f32, f64])
def test_each_math_function_gives_cs_value(name, ref, args, dtype):
    names = "xwz"[:len(args)]
    call = (name + "f" if dtype == f32 else name) + f"({', '.join(names)})"
    k = cp.ElementwiseKernel(", ".join(f"T {n}" for n in names), "T y",
                             f"y = {call}", "ck_math")
    host = [numpy.array(a, dtype) for a in args]
    got = k(*[cp.asarray(a) for a in host]).get()
    want = numpy.array([ref(*map(float, v)) for v in zip(*host)]).astype(dtype)
    assert got.dtype == dtype
    numpy.testing.assert_allclose(got, want, atol=0,
                                  rtol=5e-7 if dtype == f32 else 1e-15)
    # and it takes exactly its number of arguments, as C's does
    bad = cp.ElementwiseKernel(", ".join(f"T {n}" for n in names), "T y",
                               f"y = {name}({', '.join(names + 'x')})",
                               "ck_math_arity")
    with pytest.raises(ValueError, match=f"{name}\\(\\) takes {len(args)} "):
        bad(*[cp.asarray(a) for a in host])


def test_fast_intrinsics_are_their_float_functions_within_their_error():
    # __sinf, __expf, ...: CUDA's fast approximations of sinf, expf, ...
    # (absolute error about 2**-21 on these arguments); __frcp_rn is not
    # translated
    x = numpy.array(U, f32)
    k = cp.ElementwiseKernel(
        "T x", "T a, T b, T c, T d",
        "a = __sinf(x); b = __expf(x); c = __logf(x); d = __fdividef(1, x)",
        "ck_intrinsics")
    got = [v.get() for v in k(cp.asarray(x))]
    want = [numpy.sin(x), numpy.exp(x), numpy.log(x), 1 / x]
    for g, w in zip(got, want):
        assert g.dtype == f32
        numpy.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    k = cp.ElementwiseKernel("T x", "T y", "y = __frcp_rn(x)", "ck_frcp")
    with pytest.raises(NotImplementedError, match="the intrinsic"):
        k(cp.asarray(x))


@pytest.mark.parametrize("dtype, bits", [(f32, 12), (f64, 30)])
def test_fma_rounds_once_so_it_gives_a_products_rounding_error(dtype, bits):
    # x = 1 + 2**-bits: x * x = 1 + 2**(1 - bits) + 2**(-2 * bits) exactly,
    # and the last term is below the type's precision (a tie, to even), so
    # p = x * x drops it and fma(x, x, -p), rounded once, gives it back
    # (what fma is for; two roundings would give 0)
    x = cp.asarray(numpy.array([1 + 2.0 ** -bits], dtype))
    for fma in ("fma", "fmaf") if dtype == f32 else ("fma",):
        p, e = cp.ElementwiseKernel("T x", "T p, T e",
                                    f"p = x * x; e = {fma}(x, x, -p)",
                                    "ck_fma_error")(x)
        assert p.get()[0] == 1 + 2.0 ** (1 - bits)
        assert e.get()[0] == 2.0 ** (-2 * bits)


def test_fma_of_a_product_beyond_the_largest_double_is_exact():
    # 1.5 * 2**1000 * 2**24 = 1.5 * 2**1024 overflows a double, but
    # minus DBL_MAX (2**1024 - 2**971) the exact sum, 2**1023 + 2**971, is
    # a double: fma gives it, as IEEE 754's fusedMultiplyAdd does
    k = cp.ElementwiseKernel("T x, T w", "T y", "y = fma(x, w, -DBL_MAX)",
                             "ck_fma_big")
    y = k(cp.asarray([1.5 * 2.0 ** 1000, 1.0]), cp.asarray([2.0 ** 24, 1.0]))
    assert y.get().tolist() == [2.0 ** 1023 + 2.0 ** 971,
                                1 - numpy.finfo(f64).max]
