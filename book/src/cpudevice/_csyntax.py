"""The kernel translator's (`_ctranslate`) tokenizer and parser: a plain-C
kernel body to a small syntax tree, with C's literals.
"""
import re

import numpy

from ._csemantics import (_BOOL, _D, _F32, _F64, _I32, _Invalid, _TYPE_WORDS,
                          _TYPES, _UNSUPPORTED_WORDS, _Untranslatable)


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
            stmts.append(self.statement())
        return stmts

    def statement(self):
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
