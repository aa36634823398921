"""Plain-C kernel bodies run on the CPU device model, translated to NumPy.

An ``ElementwiseKernel`` or ``ReductionKernel`` with no NumPy twin registered
(`src.twins.register`) runs through this translator when its code is plain
C: the code is parsed (a small recursive-descent parser; nothing is passed to
``eval``), type-checked with the dtypes of the call, and run as whole-array
NumPy operations that follow CUDA C's rules:

* the usual arithmetic conversions of C: ``bool``, ``char`` and ``short``
  promote to ``int``; ``float op float`` is ``float`` (never promoted to
  ``double``); ``float op 2.0`` is ``double``, as ``2.0`` is a double
  literal; ``x * 3`` with a ``float x`` is ``float``; mixed signed and
  unsigned integers convert as C converts them;
* integer ``/`` truncates toward zero and ``%`` takes the dividend's sign;
  integer division by zero (undefined in C) gives 0; integers wrap;
* comparisons, ``!``, ``&&`` and ``||`` give ``bool``; ``&&``, ``||`` and
  ``?:`` evaluate both sides (there are no side effects to skip);
* a conversion from floating point to integer (a cast, an assignment, a
  declaration) truncates toward zero and saturates as the GPU's ``cvt.rzi``
  does: NaN gives 0, values beyond the type's range give its min or max;
* the math functions follow CUDA's C++ overloads: ``sinf(x)`` is float,
  ``sin(x)`` has the type of ``x`` (float for float and half, double for
  double and integers), ``min``/``max`` take the usual conversions of their arguments
  (``fminf``/``fmaxf`` for floating point: a NaN argument is ignored).
  Results agree with the GPU's to within each function's ULP error, not
  bit for bit.

Grammar (``*``: repeat, ``?``: optional; the final ``;`` may be omitted)::

    body        := statement*
    statement   := '{' statement* '}'
                 | 'if' '(' expr ')' statement ('else' statement)?
                 | 'const'? TYPE declarator (',' declarator)* ';'
                 | NAME ASSIGN_OP expr ';'      ASSIGN_OP: = += -= *= /= %=
                 | NAME ('++' | '--') ';'                   &= |= ^= <<= >>=
                 | ('++' | '--') NAME ';'
                 | ';'
    declarator  := NAME ('=' expr)?
    expr        := or ('?' expr ':' expr)?
    or          := and ('||' and)*          and     := bitor ('&&' bitor)*
    bitor       := bitxor ('|' bitxor)*     bitxor  := bitand ('^' bitand)*
    bitand      := equal ('&' equal)*       equal   := rel (('=='|'!=') rel)*
    rel         := shift (('<'|'<='|'>'|'>=') shift)*
    shift       := add (('<<'|'>>') add)*   add     := mul (('+'|'-') mul)*
    mul         := unary (('*'|'/'|'%') unary)*
    unary       := ('-'|'+'|'!'|'~') unary | '(' TYPE ')' unary | postfix
    postfix     := NUMBER | NAME | 'true' | 'false' | '(' expr ')'
                 | FUNCTION '(' (expr (',' expr)*)? ')'
                 | TYPE '(' expr ')'                 (functional cast)
                 | 'static_cast' '<' TYPE '>' '(' expr ')'
                 | RAW_PARAM '[' expr ']'            (flat index, C order)
    TYPE        := bool | char | signed char | unsigned char | short
                 | unsigned short | int | unsigned | unsigned int | long
                 | unsigned long | long long | unsigned long long | size_t
                 | ptrdiff_t | int8_t ... uint64_t | half | float | double
                 | a kernel's type placeholder (T, U, ...)
    NUMBER      := C integer (12, 0x1F, 017, 12u, 12L, 12ll) or floating
                   literal (1.5, 1.5f, 1e-3, .5f)
    NAME        := a parameter, a local, i (the element index, elementwise
                   only), _ind.size(), or a constant: M_PI, M_E, INFINITY,
                   NAN, CUDART_INF_F, CUDART_INF, CUDART_NAN_F, CUDART_NAN,
                   FLT_MAX, FLT_MIN, FLT_EPSILON, DBL_MAX, DBL_MIN,
                   DBL_EPSILON, INT_MAX, INT_MIN, UINT_MAX, LLONG_MAX,
                   LLONG_MIN
    FUNCTION    := sin cos tan asin acos atan sinh cosh tanh asinh acosh
                   atanh exp exp2 exp10 expm1 log log2 log10 log1p sqrt
                   rsqrt cbrt fabs floor ceil trunc round rint nearbyint pow
                   fmod fmin fmax atan2 hypot copysign fma, each also with
                   the float suffix (sinf, ...) and the fast intrinsics
                   (__sinf, __expf, __fdividef, ...); min max abs isnan
                   isinf isfinite signbit

A ``ReductionKernel`` translates ``map_expr`` (an expr over the inputs, cast
to ``reduce_type``), ``reduce_expr`` (an expr over ``a`` and ``b``),
``identity`` (an expr, or empty) and ``post_map_expr`` (statements over
``a`` and the output). The reduction is a pairwise tree, as a GPU's is, so
``reduce_expr`` must be associative and commutative, as CuPy requires.

Anything else (loops, pointers, ``return``, ``__device__`` functions in a
preamble, ``#define``, complex numbers, writes to raw arrays) raises
``NotImplementedError`` naming what could not be translated; such a kernel
needs a twin: ``@src.twins.register(name)``. Code that is not valid C
(an undeclared name, ``%`` on floats, assigning to an input) raises
``ValueError``, where CuPy would raise its compile error.
"""
import re

import numpy

__all__ = ["elementwise", "reduction"]


class _Untranslatable(NotImplementedError):
    pass


class _Invalid(ValueError):
    pass


# -- tokens -------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<num>0[xX][0-9a-fA-F]+[uUlL]*
           |(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFuUlL]*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|<=|>=|==|!=|&&|\|\||<<|>>|\+=|-=|\*=|/=|%=|&=|\|=|\^=
         |\+\+|--|->|::|[-+*/%<>=!~&|^?:;,()\[\]{}.#"'])
""", re.S | re.X)


def _tokenize(text):
    text = re.sub(r"\b_ind\s*\.\s*size\s*\(\s*\)", " _ind_size ", text)
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _Untranslatable(f"the character {text[pos]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    out.append(("end", ""))
    return out


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


# -- parser -------------------------------------------------------------------
class _Parser:
    """Recursive descent over the token list; builds tuples (see _compile)."""

    def __init__(self, text, typenames):
        self.toks = _tokenize(text)
        self.i = 0
        self.typenames = typenames

    def peek(self, k=0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, value):
        if self.peek()[1] == value and self.peek()[0] != "end":
            self.i += 1
            return True
        return False

    def expect(self, value):
        if not self.accept(value):
            self.fail(f"expected {value!r}")

    def fail(self, what):
        kind, val = self.peek()
        if kind == "name" and val in _UNSUPPORTED_WORDS:
            raise _Untranslatable(_UNSUPPORTED_WORDS[val])
        if val in ("#", '"', "'", "->", "::", "."):
            raise _Untranslatable(f"the token {val!r}")
        near = " ".join(v for _, v in self.toks[self.i:self.i + 6])
        raise _Untranslatable(f"{what} at {near!r}" if val
                              else f"{what} at the end")

    # types
    def at_type(self, k=0):
        kind, val = self.peek(k)
        return kind == "name" and (val in _TYPE_WORDS or
                                   val in self.typenames)

    def parse_type(self):
        words = []
        while self.at_type() and (not words or
                                  self.peek()[1] not in self.typenames):
            w = self.next()[1]
            words.append(w)
            if w in self.typenames or w in ("float", "double", "half",
                                             "bool", "size_t", "ptrdiff_t"):
                break
        name = " ".join(words)
        if name in self.typenames:
            return name
        if name not in _TYPES:
            raise _Untranslatable(f"the type {name!r}")
        return name

    # statements
    def body(self):
        stmts = []
        while self.peek()[0] != "end":
            stmts.append(self.statement(top=True))
        return stmts

    def statement(self, top=False):
        kind, val = self.peek()
        if val == ";":
            self.next()
            return ("block", [])
        if val == "{":
            self.next()
            stmts = []
            while not self.accept("}"):
                if self.peek()[0] == "end":
                    self.fail("expected '}'")
                stmts.append(self.statement())
            return ("block", stmts)
        if kind == "name" and val == "if":
            self.next()
            self.expect("(")
            cond = self.expr()
            self.expect(")")
            then = self.statement()
            other = self.statement() if self.accept("else") else None
            return ("if", cond, then, other)
        if kind == "name" and val == "const" or self.at_type() and \
                not (self.peek(1)[1] == "(" and
                     self.peek()[1] not in ("unsigned", "signed", "long",
                                            "short")):
            self.accept("const")
            t = self.parse_type()
            decls = []
            while True:
                kind, name = self.next()
                if kind != "name":
                    self.i -= 1
                    self.fail("expected a name to declare")
                init = self.expr() if self.accept("=") else None
                decls.append(("decl", t, name, init))
                if not self.accept(","):
                    break
            self.end_statement()
            return ("block", decls, "same-scope")
        if val in ("++", "--"):
            self.next()
            kind, name = self.next()
            if kind != "name":
                self.fail("expected a name")
            self.end_statement()
            return ("assign", name, val[0] + "=", ("num", _I32, 1))
        if kind == "name" and val not in _UNSUPPORTED_WORDS:
            op = self.peek(1)[1]
            if op in ("=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
                      "<<=", ">>="):
                self.i += 2
                e = self.expr()
                self.end_statement()
                return ("assign", val, op, e)
            if op in ("++", "--"):
                self.i += 2
                self.end_statement()
                return ("assign", val, op[0] + "=", ("num", _I32, 1))
            if op == "[":
                j = self.i
                self.i += 1
                depth = 0
                while True:
                    v = self.next()[1]
                    if v == "[":
                        depth += 1
                    elif v == "]":
                        depth -= 1
                        if depth == 0:
                            break
                    elif v == "":
                        break
                if self.peek()[1] in ("=", "+=", "-=", "*=", "/="):
                    raise _Untranslatable("a write to a raw array")
                self.i = j
        e = self.expr()
        self.end_statement()
        return ("expr", e)

    def end_statement(self):
        if not self.accept(";") and self.peek()[0] != "end" and \
                self.peek()[1] != "}":
            self.fail("expected ';'")

    # expressions
    def expr(self):
        c = self.binary(0)
        if self.accept("?"):
            a = self.expr()
            self.expect(":")
            b = self.expr()
            return ("cond", c, a, b)
        return c

    _LEVELS = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="),
               ("<", "<=", ">", ">="), ("<<", ">>"), ("+", "-"),
               ("*", "/", "%")]

    def binary(self, level):
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in self._LEVELS[level]:
            op = self.next()[1]
            left = ("bin", op, left, self.binary(level + 1))
        return left

    def unary(self):
        kind, val = self.peek()
        if kind == "op" and val in ("-", "+", "!", "~"):
            self.next()
            return ("un", val, self.unary())
        if val == "(" and self.at_type(1):
            j = self.i
            self.next()
            t = self.parse_type()
            if self.accept(")"):
                return ("cast", t, self.unary())
            self.i = j
        return self.postfix()

    def postfix(self):
        kind, val = self.next()
        if kind == "num":
            return _literal(val)
        if val == "(":
            e = self.expr()
            self.expect(")")
            return e
        if kind != "name":
            self.i -= 1
            self.fail("expected an expression")
        if val in ("true", "false"):
            return ("num", _BOOL, val == "true")
        if val == "static_cast":
            self.expect("<")
            t = self.parse_type()
            self.expect(">")
            self.expect("(")
            e = self.expr()
            self.expect(")")
            return ("cast", t, e)
        if val in _UNSUPPORTED_WORDS:
            self.i -= 1
            self.fail("")
        if self.at_type(-1):
            self.i -= 1
            t = self.parse_type()
            self.expect("(")
            e = self.expr()
            self.expect(")")
            return ("cast", t, e)
        if self.accept("("):
            args = []
            if not self.accept(")"):
                args.append(self.expr())
                while self.accept(","):
                    args.append(self.expr())
                self.expect(")")
            return ("call", val, args)
        if self.accept("["):
            e = self.expr()
            self.expect("]")
            return ("index", val, e)
        return ("name", val)


def _literal(text):
    t = text.lower()
    if t.startswith("0x"):
        digits = t.rstrip("ul")
        suffix = t[len(digits):]
        return _int_literal(int(digits, 16), suffix, hexa=True)
    if any(c in t for c in ".e") or (t.endswith("f")):
        if t.endswith("f"):
            return ("num", _F32, numpy.float32(float(t[:-1])))
        if t.endswith("l"):
            raise _Untranslatable("a long double literal")
        return ("num", _F64, numpy.float64(float(t)))
    digits = t.rstrip("ul")
    if len(digits) > 1 and digits.startswith("0"):         # octal, as in C
        try:
            return _int_literal(int(digits, 8), t[len(digits):], hexa=True)
        except ValueError:
            raise _Invalid(f"invalid octal literal {text!r}") from None
    return _int_literal(int(digits), t[len(digits):], hexa=False)


def _int_literal(v, suffix, hexa):
    unsigned = "u" in suffix
    longs = suffix.count("l")
    for dt in (["uint32", "uint64"] if unsigned else
               (["int32", "uint32", "int64", "uint64"] if hexa
                else ["int32", "int64"])):
        dt = _D(dt)
        if longs and dt.itemsize < 8:
            continue
        if v <= numpy.iinfo(dt).max:
            return ("num", dt, dt.type(v))
    raise _Invalid(f"integer literal {v} is too large")


# -- functions and constants --------------------------------------------------
def _round_half_away(x):
    t = numpy.trunc(x)
    return t + numpy.where(numpy.abs(x - t) >= 0.5, numpy.sign(x), 0)


def _fma(a, b, c):
    if a.dtype == _F32:
        return (a.astype(_F64) * b + c).astype(_F32)
    return a * b + c


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


# -- compiler: AST + types -> closures over an environment --------------------
class _Sym:
    __slots__ = ("dtype", "kind")

    def __init__(self, dtype, kind):
        self.dtype, self.kind = dtype, kind


class _Compiler:
    def __init__(self, types, symbols, index_ok):
        self.types = types              # placeholder name -> dtype
        self.scopes = [dict(symbols)]   # name -> _Sym
        self.index_ok = index_ok

    def ctype(self, name):
        return self.types[name] if name in self.types else _TYPES[name]

    def lookup(self, name):
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # expressions: return (dtype, fn(env) -> value)
    def expr(self, node):
        kind = node[0]
        return getattr(self, "e_" + kind)(*node[1:])

    def e_num(self, dt, value):
        v = dt.type(value)
        return dt, lambda env: v

    def e_name(self, name):
        sym = self.lookup(name)
        if sym is not None:
            if sym.kind == "raw":
                raise _Invalid(f"raw parameter {name!r} must be indexed")
            return sym.dtype, lambda env: env[name]
        if name in ("i", "_ind_size") and self.index_ok:
            return _I64, lambda env: env[name]
        if name in _CONSTANTS:
            dt, value = _CONSTANTS[name]
            v = dt.type(value)
            return dt, lambda env: v
        raise _Invalid(f"identifier {name!r} is undefined")

    def e_index(self, name, index):
        sym = self.lookup(name)
        if sym is None or sym.kind != "raw":
            raise _Untranslatable(f"indexing {name!r} (only raw parameters "
                                  "can be indexed)")
        idt, ifn = self.expr(index)
        if not _is_int(idt):
            raise _Invalid("an array subscript must be an integer")
        return sym.dtype, lambda env: env[name][ifn(env)]

    def e_cast(self, tname, node):
        dst = self.ctype(tname)
        src, fn = self.expr(node)
        return dst, lambda env: _convert(fn(env), src, dst)

    def e_un(self, op, node):
        dt, fn = self.expr(node)
        if op == "!":
            return _BOOL, lambda env: numpy.equal(fn(env), 0)
        pt = _promote(dt)
        if op == "~":
            if not _is_int(dt):
                raise _Invalid("~ needs an integer operand")
            return pt, lambda env: numpy.invert(_convert(fn(env), dt, pt))
        if op == "-":
            return pt, lambda env: numpy.negative(_convert(fn(env), dt, pt))
        return pt, lambda env: _convert(fn(env), dt, pt)

    def e_bin(self, op, left, right):
        lt, lf = self.expr(left)
        rt, rf = self.expr(right)
        if op in ("&&", "||"):
            uf = numpy.logical_and if op == "&&" else numpy.logical_or
            return _BOOL, lambda env: uf(numpy.not_equal(lf(env), 0),
                                         numpy.not_equal(rf(env), 0))
        if op in ("<<", ">>"):
            if not (_is_int(lt) and _is_int(rt)):
                raise _Invalid(f"{op} needs integer operands")
            pt = _promote(lt)
            uf = numpy.left_shift if op == "<<" else numpy.right_shift
            return pt, lambda env: uf(_convert(lf(env), lt, pt),
                                      _convert(rf(env), rt, pt))
        ct = _usual(lt, rt)
        if op in ("%", "&", "|", "^") and ct.kind == "f":
            raise _Invalid(f"invalid operands to binary {op} (floating "
                           "point); use fmod/fmodf for a remainder")
        uf = _BINARY[op]
        out = _BOOL if op in _COMPARISONS else ct
        return out, lambda env: uf(_convert(lf(env), lt, ct),
                                   _convert(rf(env), rt, ct))

    def e_cond(self, cond, a, b):
        ct_, cf = self.expr(cond)
        at, af = self.expr(a)
        bt, bf = self.expr(b)
        t = at if at == bt else _usual(at, bt)
        return t, lambda env: numpy.where(numpy.not_equal(cf(env), 0),
                                          _convert(af(env), at, t),
                                          _convert(bf(env), bt, t))

    def e_call(self, name, args):
        name = _INTRINSICS.get(name, name)
        if name is None:
            raise _Untranslatable("the intrinsic")
        compiled = [self.expr(a) for a in args]
        types = [t for t, _ in compiled]
        fns = [f for _, f in compiled]
        if name in ("min", "max"):
            self.arity(name, args, 2)
            ct = _usual(*types)
            uf = ({"min": numpy.fmin, "max": numpy.fmax} if ct.kind == "f"
                  else {"min": numpy.minimum, "max": numpy.maximum})[name]
            return ct, self.apply(uf, fns, types, ct)
        if name == "abs":
            self.arity(name, args, 1)
            ct = _promote(types[0])
            return ct, self.apply(numpy.absolute, fns, types, ct)
        if name in _PREDICATES:
            self.arity(name, args, 1)
            uf = _PREDICATES[name]
            ct = types[0] if types[0].kind == "f" else _F64
            return _BOOL, lambda env: uf(_convert(fns[0](env), types[0], ct))
        if name in _FUNCS:
            ct = types[0]
            for t in types[1:]:
                ct = _usual(ct, t)
            ct = _F64 if ct.kind != "f" else (_F32 if ct == _F16 else ct)
        elif name.endswith("f") and name[:-1] in _FUNCS:
            name, ct = name[:-1], _F32
        else:
            raise _Untranslatable(f"the function {name}()")
        uf, n = _FUNCS[name]
        self.arity(name, args, n)
        return ct, self.apply(uf, fns, types, ct)

    @staticmethod
    def arity(name, args, n):
        if len(args) != n:
            raise _Invalid(f"{name}() takes {n} argument(s), "
                           f"{len(args)} given")

    @staticmethod
    def apply(uf, fns, types, ct):
        if len(fns) == 1:
            f0, t0 = fns[0], types[0]
            return lambda env: numpy.asarray(uf(_convert(
                numpy.asarray(f0(env)), t0, ct))).astype(ct, copy=False)
        return lambda env: numpy.asarray(uf(*[
            numpy.asarray(_convert(f(env), t, ct))
            for f, t in zip(fns, types)])).astype(ct, copy=False)

    # statements: return fn(env) (mutating env) and the names they assign
    def block(self, stmts, new_scope=True):
        if new_scope:
            self.scopes.append({})
        fns = [self.stmt(s) for s in stmts]
        if new_scope:
            self.scopes.pop()

        def run(env):
            for f in fns:
                f(env)
        return run

    def stmt(self, node):
        kind = node[0]
        if kind == "block":
            return self.block(node[1], new_scope=len(node) == 2)
        if kind == "decl":
            _, tname, name, init = node
            dt = self.ctype(tname)
            if name in self.scopes[-1]:
                raise _Invalid(f"{name!r} is declared twice")
            if init is None:
                fn = None
            else:
                st, fn = self.expr(init)
            self.scopes[-1][name] = _Sym(dt, "local")
            if fn is None:
                zero = dt.type(0)
                return lambda env: env.__setitem__(name, zero)
            return lambda env: env.__setitem__(name, _convert(fn(env), st,
                                                              dt))
        if kind == "assign":
            _, name, op, e = node
            sym = self.lookup(name)
            if sym is None:
                raise _Invalid(f"identifier {name!r} is undefined")
            if sym.kind not in ("local", "out"):
                raise _Invalid(f"{name!r} is read-only (an input); assign "
                               "to an output or a local")
            if op != "=":
                e = ("bin", op[:-1], ("name", name), e)
            st, fn = self.expr(e)
            dt = sym.dtype
            return lambda env: env.__setitem__(name, _convert(fn(env), st,
                                                              dt))
        if kind == "expr":
            self.expr(node[1])
            return lambda env: None
        if kind == "if":
            _, cond, then, other = node
            ct, cf = self.expr(cond)
            tf = self.block([then])
            of = self.block([other]) if other is not None else None

            def run_if(env):
                c = numpy.not_equal(cf(env), 0)
                if not numpy.ndim(c):           # a uniform branch
                    (tf if c else (of or (lambda e: None)))(env)
                    return
                e1, e2 = dict(env), dict(env)
                tf(e1)
                if of is not None:
                    of(e2)
                for k in env:
                    if e1[k] is not env[k] or e2[k] is not env[k]:
                        env[k] = numpy.where(c, e1[k], e2[k])
            return run_if
        raise _Untranslatable(kind)


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


# -- the two kernel kinds -----------------------------------------------------
_parsed = {}


def _parse(text, typenames, what):
    key = (text, typenames, what)
    ast = _parsed.get(key)
    if ast is None:
        p = _Parser(text, typenames)
        ast = p.body() if what == "body" else p.expr()
        if what == "expr" and p.peek()[0] != "end":
            p.fail("unexpected text after the expression")
        _parsed[key] = ast
    return ast


def _explain(kind, name, where, err):
    if isinstance(err, _Untranslatable):
        return NotImplementedError(
            f"the CPU device model cannot translate {kind} {name!r}: "
            f"{err} in its {where} is outside the plain C it runs (see "
            "src.cpudevice._ctranslate); register a NumPy twin with "
            f"@src.twins.register({name!r})")
    return ValueError(f"{kind} {name!r}: invalid CUDA C in its {where}: "
                      f"{err}")


def _check_extras(kind, name, extras):
    for what, text in extras:
        if text and text.strip():
            raise NotImplementedError(
                f"the CPU device model cannot translate {kind} {name!r}: it "
                f"has a {what}, which is outside the plain C it runs (see "
                "src.cpudevice._ctranslate); register a NumPy twin with "
                f"@src.twins.register({name!r})")


def _symbols(params, dtype_of, kinds):
    return {p.name: _Sym(dtype_of(p), "raw" if p.raw else kind)
            for p, kind in zip(params, kinds)}


def _placeholders(params, dtype_of):
    return {p.ctype: dtype_of(p) for p in params if p.ctype not in _TYPES}


def elementwise(kernel, dtype_of):
    """A twin for ElementwiseKernel ``kernel``: ``fn(*inputs, *outputs)``.

    Parsed and type-checked now (errors at the call, as CuPy's compile
    errors are); ``dtype_of(param)`` gives each parameter's dtype."""
    name = kernel.name
    _check_extras("ElementwiseKernel", name,
                  [("preamble", kernel.preamble),
                   ("loop_prep", getattr(kernel, "loop_prep", "")),
                   ("after_loop", getattr(kernel, "after_loop", ""))])
    ins, outs = kernel.in_params, kernel.out_params
    for p in ins + outs:
        if dtype_of(p).kind == "c":
            raise _explain("ElementwiseKernel", name, "parameters",
                           _Untranslatable("complex numbers"))
    types = _placeholders(ins + outs, dtype_of)
    symbols = _symbols(ins, dtype_of, ["in"] * len(ins))
    symbols.update(_symbols(outs, dtype_of, ["out"] * len(outs)))
    try:
        ast = _parse(kernel.operation, frozenset(types), "body")
        run = _Compiler(types, symbols, index_ok=True).block(ast)
    except (_Untranslatable, _Invalid) as e:
        raise _explain("ElementwiseKernel", name, "operation", e) from None
    in_names = [p.name for p in ins]
    out_params = list(outs)

    def twin(*arrays):
        host_in, host_out = arrays[:len(ins)], arrays[len(ins):]
        shape = host_out[0].shape if host_out else ()
        env = dict(zip(in_names, host_in))
        for p, a in zip(ins, host_in):
            if p.raw:
                env[p.name] = numpy.asarray(a).reshape(-1)
        for p, o in zip(out_params, host_out):
            env[p.name] = o
        size = 1
        for s in shape:
            size *= s
        env["_ind_size"] = numpy.int64(size)
        env["i"] = numpy.arange(size, dtype=numpy.int64).reshape(shape)
        start = dict(env)
        with numpy.errstate(all="ignore"):
            run(env)
        for p, o in zip(out_params, host_out):
            v = env[p.name]
            if v is not start[p.name]:
                o[...] = v
    return twin


def reduction(kernel, dtype_of):
    """A twin for ReductionKernel ``kernel``:
    ``fn(*inputs, axis=None, keepdims=False)`` returns the reduced value."""
    name = kernel.name
    kind = "ReductionKernel"
    _check_extras(kind, name, [("preamble", kernel.preamble)])
    ins, out = kernel.in_params, kernel.out_params[0]
    types = _placeholders(ins + (out,), dtype_of)
    try:
        rname = kernel.reduce_type or out.ctype
        rtype = types[rname] if rname in types else _TYPES.get(rname)
        if rtype is None:
            raise _Untranslatable(f"the reduce_type {rname!r}")
    except _Untranslatable as e:
        raise _explain(kind, name, "reduce_type", e) from None
    if any(dtype_of(p).kind == "c" for p in ins + (out,)) or rtype.kind == "c":
        raise _explain(kind, name, "parameters",
                       _Untranslatable("complex numbers"))
    typenames = frozenset(types)
    parts = {}
    for where, text, what, syms in [
            ("map_expr", kernel.map_expr, "expr",
             _symbols(ins, dtype_of, ["in"] * len(ins))),
            ("reduce_expr", kernel.reduce_expr, "expr",
             {"a": _Sym(rtype, "in"), "b": _Sym(rtype, "in")}),
            ("identity", kernel.identity, "expr", {}),
            ("post_map_expr", kernel.post_map_expr, "body",
             {"a": _Sym(rtype, "in"), out.name: _Sym(dtype_of(out), "out")})]:
        if where == "identity" and not (text or "").strip():
            parts[where] = None
            continue
        try:
            ast = _parse(text, typenames, what)
            c = _Compiler(types, syms, index_ok=False)
            parts[where] = c.block(ast) if what == "body" else c.expr(ast)
        except (_Untranslatable, _Invalid) as e:
            raise _explain(kind, name, where, e) from None
    mt, mf = parts["map_expr"]
    rt, rf = parts["reduce_expr"]
    post = parts["post_map_expr"]
    identity = parts["identity"]
    in_names = [p.name for p in ins]
    odt = dtype_of(out)

    def combine(a, b):
        return _convert(rf({"a": a, "b": b}), rt, rtype)

    def twin(*arrays, axis=None, keepdims=False):
        env = dict(zip(in_names, arrays))
        shape = numpy.broadcast_shapes(*[numpy.shape(a) for a in arrays])
        with numpy.errstate(all="ignore"):
            m = numpy.broadcast_to(_convert(mf(env), mt, rtype), shape)
            axes = (tuple(range(len(shape))) if axis is None else
                    numpy.lib.array_utils.normalize_axis_tuple(
                        axis, len(shape)))
            kept = [d for d in range(len(shape)) if d not in axes]
            m = numpy.transpose(m, kept + list(axes))
            kshape = tuple(shape[d] for d in kept)
            n = 1
            for d in axes:
                n *= shape[d]
            m = m.reshape(kshape + (n,))
            if n == 0:
                if identity is None:
                    raise ValueError("zero-size array to reduction operation"
                                     f" {name} which has no identity")
                it, ifn = identity
                a = numpy.full(kshape, _convert(ifn({}), it, rtype), rtype)
            else:
                while n > 1:
                    h = n // 2
                    r = numpy.broadcast_to(
                        combine(m[..., :h], m[..., h:2 * h]), kshape + (h,))
                    if n % 2:
                        r = numpy.concatenate([r, m[..., 2 * h:]], axis=-1)
                    m, n = r, h + n % 2
                a = m[..., 0]
            penv = {"a": a, out.name: numpy.zeros(kshape, odt)}
            post(penv)
            res = numpy.asarray(penv[out.name]).astype(odt, copy=False)
        res = numpy.broadcast_to(res, kshape)
        if keepdims:
            res = res.reshape(tuple(1 if d in axes else s
                                    for d, s in enumerate(shape)))
        return res
    return twin
