"""C's types and semantics for the kernel translator (`_ctranslate`): the
types and their promotions, C's conversions (saturating float-to-int), the
math functions and constants a body may use, C's division and remainder,
and the translator's two errors.
"""
from fractions import Fraction

import numpy


class _Untranslatable(NotImplementedError):
    pass


class _Invalid(ValueError):
    pass


# -- C types ------------------------------------------------------------------
_D = numpy.dtype
_TYPES = {
    "bool": _D("bool"), "char": _D("int8"), "signed char": _D("int8"),
    "unsigned char": _D("uint8"), "short": _D("int16"),
    "unsigned short": _D("uint16"), "int": _D("int32"),
    "signed": _D("int32"), "signed int": _D("int32"),
    "unsigned": _D("uint32"), "unsigned int": _D("uint32"),
    "long": _D("int64"), "unsigned long": _D("uint64"),
    "long long": _D("int64"), "unsigned long long": _D("uint64"),
    "size_t": _D("uint64"), "ptrdiff_t": _D("int64"),
    "int8_t": _D("int8"), "int16_t": _D("int16"), "int32_t": _D("int32"),
    "int64_t": _D("int64"), "uint8_t": _D("uint8"), "uint16_t": _D("uint16"),
    "uint32_t": _D("uint32"), "uint64_t": _D("uint64"),
    "half": _D("float16"), "float16": _D("float16"), "float": _D("float32"),
    "double": _D("float64"),
}
_TYPE_WORDS = {"bool", "char", "short", "int", "long", "signed", "unsigned",
               "size_t", "ptrdiff_t", "half", "float16", "float", "double",
               "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t",
               "uint16_t", "uint32_t", "uint64_t"}
_UNSUPPORTED_WORDS = {
    "for": "a `for` loop", "while": "a `while` loop", "do": "a `do` loop",
    "return": "`return`", "switch": "`switch`", "goto": "`goto`",
    "break": "`break`", "continue": "`continue`", "struct": "a struct",
    "__syncthreads": "__syncthreads()", "atomicAdd": "atomicAdd()",
    "complex": "complex numbers", "thrust": "thrust",
}
_F64, _F32, _F16, _BOOL = _D("float64"), _D("float32"), _D("float16"), \
    _D("bool")
_I32, _I64 = _D("int32"), _D("int64")


def _is_int(dt):
    return dt.kind in "iub"


def _promote(dt):
    """C's integer promotion: bool, char and short become int."""
    if dt.kind in "iub" and dt.itemsize < 4:
        return _I32
    return dt


def _usual(a, b):
    """C's usual arithmetic conversions (half as CuPy's float16 class)."""
    if a.kind == "f" or b.kind == "f":
        if a.kind == "f" and b.kind == "f":
            return a if a.itemsize >= b.itemsize else b
        return a if a.kind == "f" else b
    a, b = _promote(a), _promote(b)
    if a == b:
        return a
    if (a.kind == "u") == (b.kind == "u"):
        return a if a.itemsize >= b.itemsize else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    return u if u.itemsize >= s.itemsize else s


def _saturate_to_int(v, dt):
    """Float to integer as the GPU converts: truncate, NaN to 0, saturate."""
    v = numpy.asarray(v)
    if v.dtype.itemsize < 4:
        v = v.astype(numpy.float32)
    info = numpy.iinfo(dt)
    hi = v.dtype.type(float(info.max) + 1.0)   # powers of two: exact in
    lo = v.dtype.type(float(info.min))         # float32 and float64
    with numpy.errstate(invalid="ignore"):
        t = numpy.trunc(v)
        ok = (t >= lo) & (t < hi)
        res = numpy.where(ok, t, 0.0).astype(dt)
        res = numpy.where(t >= hi, info.max, res)
        res = numpy.where(t < lo, info.min, res)
    return res.astype(dt, copy=False)


def _convert(v, src, dst):
    """Convert value ``v`` of C type ``src`` to ``dst`` as C does."""
    if src == dst:
        return v
    if dst.kind == "b":
        return numpy.not_equal(v, 0)
    if dst.kind in "iu" and src.kind == "f":
        return _saturate_to_int(v, dst)
    return numpy.asarray(v).astype(dst)


# -- functions and constants --------------------------------------------------
def _round_half_away(x):
    t = numpy.trunc(x)
    return t + numpy.where(numpy.abs(x - t) >= 0.5, numpy.sign(x), 0)


def _two_sum(a, b):
    """s + t == a + b exactly, s the rounded sum (Knuth's TwoSum)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a, b):
    """p + e == a * b exactly, p the rounded product (Dekker, with
    Veltkamp's split; exact while nothing overflows or underflows)."""
    p = a * b
    ca, cb = a * 134217729.0, b * 134217729.0        # 2**27 + 1
    ah, bh = ca - (ca - a), cb - (cb - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _round_odd(s, t):
    """s + t rounded to odd, from s = RN(s + t) and its exact error t: an
    inexact sum takes the neighbour whose last bit is odd."""
    even = (numpy.asarray(s, _F64).view(numpy.int64) & 1) == 0
    away = numpy.nextafter(s, numpy.where(t > 0, numpy.inf, -numpy.inf))
    return numpy.where((t != 0) & even & numpy.isfinite(t), away, s)


def _fma_exact(a, b, c):
    """One element of fma, with exact rationals (float() rounds once)."""
    r = Fraction(a) * Fraction(b) + Fraction(c)
    if r == 0:
        return a * b + c             # a * b is exact: IEEE's sign of zero
    try:
        return float(r)
    except OverflowError:
        return numpy.inf if r > 0 else -numpy.inf


def _fma(a, b, c):
    """C's fma: a * b + c rounded once, as the GPU's fma (0 ULP) does; two
    roundings would lose what fma is for (fma(a, b, -a * b) is the product's
    rounding error, not 0)."""
    a, b, c = numpy.broadcast_arrays(a, b, c)
    if a.dtype == _F32:
        # a * b is exact in double; the double sum rounded to odd rounds
        # to float as the exact sum would (53 >= 2 * 24 + 2 bits)
        s, t = _two_sum(a.astype(_F64) * b, c.astype(_F64))
        return _round_odd(s, t).astype(_F32)
    # Boldo and Melquiond's emulated FMA (IEEE Trans. Computers, 2008):
    # exact product, exact sum with c, the two low parts added rounded to
    # odd, then one rounding to nearest
    ph, pl = _two_prod(a, b)
    th, tl = _two_sum(c, ph)
    z = th + _round_odd(*_two_sum(tl, pl))
    z = numpy.where(z == 0, a * b + c, z)   # IEEE's sign of an exact zero
    big, small = 2.0 ** 900, 2.0 ** -900    # no overflow, no underflow
    safe = ((abs(a) < big) & (abs(b) < big) & (abs(c) < big)
            & ((ph == 0) | ((abs(ph) > small) & (abs(ph) < big))))
    if safe.all():
        return z
    z = numpy.array(z)
    for k in map(tuple, numpy.argwhere(~safe)):
        if not (numpy.isfinite(a[k]) and numpy.isfinite(b[k])):
            z[k] = a[k] * b[k] + c[k]
        elif not numpy.isfinite(c[k]):
            z[k] = c[k]               # a finite product, an infinite c
        else:
            z[k] = _fma_exact(float(a[k]), float(b[k]), float(c[k]))
    return z


_FUNCS = {   # name: (numpy function, number of arguments)
    "sin": (numpy.sin, 1), "cos": (numpy.cos, 1), "tan": (numpy.tan, 1),
    "asin": (numpy.arcsin, 1), "acos": (numpy.arccos, 1),
    "atan": (numpy.arctan, 1), "sinh": (numpy.sinh, 1),
    "cosh": (numpy.cosh, 1), "tanh": (numpy.tanh, 1),
    "asinh": (numpy.arcsinh, 1), "acosh": (numpy.arccosh, 1),
    "atanh": (numpy.arctanh, 1), "exp": (numpy.exp, 1),
    "exp2": (numpy.exp2, 1), "exp10": (lambda x: numpy.power(
        x.dtype.type(10), x), 1), "expm1": (numpy.expm1, 1),
    "log": (numpy.log, 1), "log2": (numpy.log2, 1),
    "log10": (numpy.log10, 1), "log1p": (numpy.log1p, 1),
    "sqrt": (numpy.sqrt, 1), "rsqrt": (lambda x: 1 / numpy.sqrt(x), 1),
    "cbrt": (numpy.cbrt, 1), "fabs": (numpy.fabs, 1),
    "floor": (numpy.floor, 1), "ceil": (numpy.ceil, 1),
    "trunc": (numpy.trunc, 1), "round": (_round_half_away, 1),
    "rint": (numpy.rint, 1), "nearbyint": (numpy.rint, 1),
    "pow": (numpy.power, 2), "fmod": (numpy.fmod, 2),
    "fmin": (numpy.fmin, 2), "fmax": (numpy.fmax, 2),
    "atan2": (numpy.arctan2, 2), "hypot": (numpy.hypot, 2),
    "copysign": (numpy.copysign, 2), "fma": (_fma, 3),
    "fdivide": (numpy.true_divide, 2),
}
_INTRINSICS = {"__sinf": "sinf", "__cosf": "cosf", "__tanf": "tanf",
               "__expf": "expf", "__exp10f": "exp10f", "__logf": "logf",
               "__log2f": "log2f", "__log10f": "log10f", "__powf": "powf",
               "__fdividef": "fdividef", "__fsqrt_rn": "sqrtf",
               "__frcp_rn": None}
_PREDICATES = {"isnan": numpy.isnan, "isinf": numpy.isinf,
               "isfinite": numpy.isfinite, "signbit": numpy.signbit}

_CONSTANTS = {
    "M_PI": (_F64, numpy.pi), "M_E": (_F64, numpy.e),
    "INFINITY": (_F32, numpy.inf), "NAN": (_F32, numpy.nan),
    "CUDART_INF_F": (_F32, numpy.inf), "CUDART_INF": (_F64, numpy.inf),
    "CUDART_NAN_F": (_F32, numpy.nan), "CUDART_NAN": (_F64, numpy.nan),
    "FLT_MAX": (_F32, numpy.finfo(numpy.float32).max),
    "FLT_MIN": (_F32, numpy.finfo(numpy.float32).tiny),
    "FLT_EPSILON": (_F32, numpy.finfo(numpy.float32).eps),
    "DBL_MAX": (_F64, numpy.finfo(numpy.float64).max),
    "DBL_MIN": (_F64, numpy.finfo(numpy.float64).tiny),
    "DBL_EPSILON": (_F64, numpy.finfo(numpy.float64).eps),
    "INT_MAX": (_I32, 2**31 - 1), "INT_MIN": (_I32, -2**31),
    "UINT_MAX": (_D("uint32"), 2**32 - 1),
    "LLONG_MAX": (_I64, 2**63 - 1), "LLONG_MIN": (_I64, -2**63),
}

_COMPARISONS = {"<", "<=", ">", ">=", "==", "!="}


def _c_divide(a, b):
    if a.dtype.kind == "f":
        return numpy.true_divide(a, b)
    q = numpy.floor_divide(a, b)
    fix = (numpy.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(q.dtype, copy=False)


def _c_remainder(a, b):
    return numpy.fmod(a, b)


_BINARY = {"+": numpy.add, "-": numpy.subtract, "*": numpy.multiply,
           "/": lambda a, b: _c_divide(numpy.asarray(a), numpy.asarray(b)),
           "%": _c_remainder, "&": numpy.bitwise_and,
           "|": numpy.bitwise_or, "^": numpy.bitwise_xor,
           "<": numpy.less, "<=": numpy.less_equal, ">": numpy.greater,
           ">=": numpy.greater_equal, "==": numpy.equal,
           "!=": numpy.not_equal}
