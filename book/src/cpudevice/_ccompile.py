"""The kernel translator's (`_ctranslate`) compiler: a parsed plain-C body
to NumPy operations with CUDA C's semantics (types, promotions,
conversions, division).
"""
import numpy

from ._csemantics import (_BINARY, _BOOL, _COMPARISONS, _CONSTANTS, _convert,
                          _F16, _F32, _F64, _FUNCS, _I64, _INTRINSICS,
                          _Invalid, _is_int, _PREDICATES, _promote, _TYPES,
                          _Untranslatable, _usual)


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
