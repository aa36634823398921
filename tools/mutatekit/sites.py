"""Sampling: every mutant of `book/src` (the classic kinds of fault), and a
reproducible sample of them."""
import ast
import bisect
import io
import random
import tokenize
from dataclasses import dataclass

from . import ROOT, SRC

NO_MUTATE = "pragma: no mutate"


@dataclass(frozen=True)
class Mutant:
    """One fault: replace source[start:end] (character offsets) by
    `mutated`. `line` is 1-based, `col` 0-based (characters)."""
    file: str
    line: int
    col: int
    kind: str
    start: int
    end: int
    original: str
    mutated: str

    @property
    def id(self):
        return f"{self.file}:{self.line}:{self.col}:{self.kind}"


COMPARE = {ast.Lt: ("<", "<="), ast.LtE: ("<=", "<"),
           ast.Gt: (">", ">="), ast.GtE: (">=", ">"),
           ast.Eq: ("==", "!="), ast.NotEq: ("!=", "=="),
           ast.Is: ("is", "is not"), ast.IsNot: ("is not", "is"),
           ast.In: ("in", "not in"), ast.NotIn: ("not in", "in")}
ARITH = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"),
         ast.Mult: ("*", "/"), ast.Div: ("/", "*")}
BOOL = {ast.And: ("and", "or"), ast.Or: ("or", "and")}


class _Source:
    """A file's text with ast positions turned into character offsets and
    its tokens, to find operators that ast gives no position for."""

    def __init__(self, text):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))
        self.tokens = []                    # (start, end, type, string)
        for t in tokenize.generate_tokens(io.StringIO(text).readline):
            if t.type in (tokenize.OP, tokenize.NAME):
                self.tokens.append((self.offset(*t.start, chars=True),
                                    self.offset(*t.end, chars=True),
                                    t.type, t.string))
        self.token_starts = [t[0] for t in self.tokens]

    def offset(self, line, col, chars=False):
        """Character offset of (line, col); ast's col counts UTF-8 bytes."""
        if not chars and line <= len(self.lines):
            col = len(self.lines[line - 1].encode()[:col].decode(
                "utf-8", "replace"))
        return self.starts[line - 1] + col

    def span(self, node):
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def position(self, offset):
        """(line, col) of a character offset."""
        line = bisect.bisect_right(self.starts, offset) - 1
        return line + 1, offset - self.starts[line]

    def between(self, a, b):
        """The OP and NAME tokens wholly in [a, b)."""
        out = []
        for t in self.tokens[bisect.bisect_left(self.token_starts, a):]:
            if t[1] > b:
                break
            out.append(t)
        return out


def _skipped_regions(tree, src):
    """Character ranges whose text only a reader sees."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            out.append(src.span(node))
        elif isinstance(node, ast.Raise) and node.exc is not None:
            out.append(src.span(node))
        elif isinstance(node, ast.Assert) and node.msg is not None:
            out.append(src.span(node.msg))
        elif (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
              and isinstance(node.test.left, ast.Name)
              and node.test.left.id == "__name__"):
            out.append(src.span(node))
    return out


def _docstrings(tree):
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr)
                    and isinstance(first.value, ast.Constant)):
                ids.add(id(first.value))
    return ids


def _number(value):
    """The changed number: 0 -> 1, 1 -> 0, n -> n + 1."""
    if value == 0:
        return type(value)(1)
    if value == 1:
        return type(value)(0)
    return value + 1


def sites(text, file="<src>"):
    """Every mutant of one file's source text, in source order."""
    tree = ast.parse(text)
    src = _Source(text)
    skip = _skipped_regions(tree, src)
    docs = _docstrings(tree)
    found = []

    def add(kind, start, end, mutated):
        if any(a <= start < b for a, b in skip):
            return
        line, col = src.position(start)
        if NO_MUTATE in src.lines[line - 1]:
            return
        found.append(Mutant(file, line, col, kind, start, end,
                            text[start:end], mutated))

    def op_token(a, b, words):
        """The first operator token in [a, b) spelled as one of `words`
        (a two-word one such as `is not` as one span)."""
        toks = src.between(a, b)
        for i, (s, e, _, string) in enumerate(toks):
            for w in words:
                parts = w.split()
                if ([t[3] for t in toks[i:i + len(parts)]] == parts):
                    return s, toks[i + len(parts) - 1][1], w
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            prev = node.left
            for op, right in zip(node.ops, node.comparators):
                old, new = COMPARE[type(op)]
                hit = op_token(src.span(prev)[1], src.span(right)[0], [old])
                if hit:
                    add("compare", hit[0], hit[1], new)
                prev = right
        elif isinstance(node, ast.BinOp) and type(node.op) in ARITH:
            if any(isinstance(v, ast.JoinedStr) or (
                    isinstance(v, ast.Constant) and isinstance(v.value, str))
                   for v in (node.left, node.right)):
                continue                    # string concatenation
            old, new = ARITH[type(node.op)]
            hit = op_token(src.span(node.left)[1], src.span(node.right)[0],
                           [old])
            if hit:
                add("arith", hit[0], hit[1], new)
        elif isinstance(node, ast.AugAssign) and type(node.op) in ARITH:
            old, new = ARITH[type(node.op)]
            hit = op_token(src.span(node.target)[1], src.span(node.value)[0],
                           [old + "="])
            if hit:
                add("arith", hit[0], hit[1], new + "=")
        elif isinstance(node, ast.BoolOp):
            old, new = BOOL[type(node.op)]
            for a, b in zip(node.values, node.values[1:]):
                hit = op_token(src.span(a)[1], src.span(b)[0], [old])
                if hit:
                    add("boolean", hit[0], hit[1], new)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            s, _ = src.span(node)
            toks = src.between(s, src.span(node.operand)[1])
            if toks and toks[0][3] == "not" and len(toks) > 1:
                add("not", s, toks[1][0], "")
        elif isinstance(node, ast.Constant) and id(node) not in docs:
            v = node.value
            s, e = src.span(node)
            if isinstance(v, bool):
                add("true-false", s, e, repr(not v))
            elif isinstance(v, (int, float)) and not isinstance(v, complex):
                add("number", s, e, repr(_number(v)))
        elif isinstance(node, ast.Return) and node.value is not None:
            v = node.value
            if isinstance(v, ast.Constant) and v.value is None:
                continue
            s, e = src.span(node.value)
            add("return-none", s, e, "None")
    found = [m for m in found if _valid(text, m)]
    found.sort(key=lambda m: (m.start, m.kind))
    return found


def apply(text, m):
    """The source text with mutant `m` applied."""
    if text[m.start:m.end] != m.original:
        raise ValueError(f"{m.id}: source changed since the sites were found")
    return text[:m.start] + m.mutated + text[m.end:]


def _valid(text, m):
    """The mutated source still parses (every kind changes the program by
    construction)."""
    try:
        compile(apply(text, m), m.file, "exec", ast.PyCF_ONLY_AST)
    except SyntaxError:
        return False
    return True


def all_sites(root=ROOT):
    out = []
    for path in sorted((root / SRC).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        out.extend(sites(path.read_text(encoding="utf-8"), rel))
    ids = [m.id for m in out]
    assert len(ids) == len(set(ids)), "mutant ids must be unique"
    return out


def sample(mutants, n, seed):
    """A reproducible sample of `n`, spread over the files in proportion
    to their sites (largest remainders), drawn with `random.Random(seed)`."""
    if n >= len(mutants):
        return sorted(mutants, key=lambda m: (m.file, m.start, m.kind))
    by_file = {}
    for m in sorted(mutants, key=lambda m: (m.file, m.start, m.kind)):
        by_file.setdefault(m.file, []).append(m)
    total = len(mutants)
    exact = {f: n * len(ms) / total for f, ms in by_file.items()}
    quota = {f: int(x) for f, x in exact.items()}
    rest = sorted(by_file, key=lambda f: (-(exact[f] - quota[f]), f))
    for f in rest[:n - sum(quota.values())]:
        quota[f] += 1
    rng = random.Random(seed)
    picked = []
    for f in sorted(by_file):
        picked.extend(rng.sample(by_file[f], quota[f]))
    return sorted(picked, key=lambda m: (m.file, m.start, m.kind))
