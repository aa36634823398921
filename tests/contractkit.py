"""The contract machinery: what `test_contract.py` uses to hold the
book's CuPy (and NVML) names to CuPy's and to the CPU device model's.

What it reads: the code cells of ``book/**/*.ipynb`` (IPython magics and
shell lines stripped first) and ``book/src/**/*.py``, except the model itself
(``book/src/cpudevice/``) and ``book/src/backend.py``, which import CuPy by
its own name. In that code the `ast` finds every attribute chain rooted at
the names ``cp``, ``cpx`` or ``nvml`` (``cp.cuda.Stream(non_blocking=True)``
gives ``cp.cuda.Stream``, called with keyword ``non_blocking``), and every
``from cupy... import name`` (or ``from pynvml import name``). Methods of
*results* (``x.get()``, ``stream.synchronize()``) cannot be resolved
statically; the table `CUPY_SIGNATURES` below covers the most used of them.

CuPy's parameters are read with `inspect.signature`. Many CuPy callables are
Cython builtins that it cannot read: for those, CuPy's parameters come from
`CUPY_SIGNATURES` (copied from CuPy's source and checked against the
installed CuPy where it can be read); elsewhere only existence is checked.
A signature of just ``(*args, **kwargs)`` says nothing and counts as
unreadable. Dunder chains such as ``cp.__version__`` are checked like any
other: the model must have them too.

The walk over the book runs once per process (`walk_book` is cached):
the tests are parametrized by its chains at collection time.
"""
import ast
import functools
import importlib
import inspect
import json
import re
import types
from pathlib import Path

BOOK = Path(__file__).resolve().parents[1] / "book"
ROOTS = ("cp", "cpx", "nvml")
# What each root is on a GPU ("CuPy's side") and on the CPU device model.
CUPY_PACKAGES = {"cp": "cupy", "cpx": "cupyx", "nvml": "pynvml"}
MODEL_PACKAGES = {"cp": "src.cpudevice", "cpx": "src.cpudevice.cupyx",
                  "nvml": "src.nvmlmodel"}
P = inspect.Parameter


# --- finding the chains ------------------------------------------------------

# Line magics whose argument is a Python statement: the statement is kept.
_CODE_MAGICS = {"time", "timeit", "prun"}
# Their options that take a separate value (``-n 10``, ``-r 3``, ...).
_VALUE_OPTIONS = {"-n", "-r", "-p", "-s", "-T", "-D", "-l"}
# ``t = %timeit -o f()``, ``files = !ls``
_MAGIC_ASSIGNMENT = re.compile(r"([A-Za-z_][\w\s,]*?)\s*=\s*([%!].*)")


def _magic_statement(text):
    """The Python in one magic or shell line (``text`` starts with % or !)."""
    if text.startswith("!"):
        return "pass"
    name, _, rest = text.lstrip("%").partition(" ")
    if name not in _CODE_MAGICS:
        return "pass"
    rest = rest.strip()
    while rest.startswith("-"):
        option, _, rest = rest.partition(" ")
        rest = rest.lstrip()
        if option in _VALUE_OPTIONS:
            rest = rest.partition(" ")[2].lstrip()
    return rest or "pass"


def strip_magics(source):
    """``source`` of a notebook cell with IPython's syntax made Python.

    ``%time``/``%timeit``/``%prun`` keep their statement; other line magics
    and ``!`` shell lines become ``pass`` (indentation kept). A cell magic
    other than ``%%time``/``%%timeit``/``%%prun``/``%%capture`` means the
    cell is not Python (``%%bash``, ``%%writefile``): it gives ``""``.
    """
    lines = source.splitlines()
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        name = lines[first].strip()[2:].partition(" ")[0]
        if name not in _CODE_MAGICS | {"capture"}:
            return ""
        head = lines[first].strip()[1:]            # "%timeit -n 3 setup"
        lines[first] = _magic_statement(head) if name != "capture" else ""
    out = []
    depth = 0                       # open brackets: inside an expression
    for line in lines:
        code = line.lstrip()
        indent = line[:len(line) - len(code)]
        continued = depth > 0 or (out and out[-1].rstrip().endswith("\\"))
        depth += _bracket_balance(code)
        if continued:               # e.g. a wrapped `a\n% b`: not a magic
            out.append(line)
            continue
        assigned = _MAGIC_ASSIGNMENT.fullmatch(code)
        if code.startswith(("%", "!")):
            code = _magic_statement(code)
        elif assigned:
            value = _magic_statement(assigned[2])
            code = f"{assigned[1]} = {'None' if value == 'pass' else value}"
        out.append(indent + code)
    return "\n".join(out)


def _bracket_balance(code):
    """Opened minus closed brackets on a line, outside strings/comments."""
    balance, quote = 0, None
    for ch in code:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            break
        elif ch in "([{":
            balance += 1
        elif ch in ")]}":
            balance -= 1
    return balance


def _chain_of(node):
    """``"cp.cuda.Stream"`` for the node of ``cp.cuda.Stream``; else None."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if names and isinstance(node, ast.Name) and node.id in ROOTS:
        return ".".join([node.id, *reversed(names)])
    return None


class _ChainFinder(ast.NodeVisitor):
    def __init__(self):
        self.chains = {}                 # chain -> keywords it is called with

    def _add(self, chain, keywords=()):
        self.chains.setdefault(chain, set()).update(keywords)

    def visit_Call(self, node):
        chain = _chain_of(node.func)
        if chain:
            self._add(chain, (k.arg for k in node.keywords if k.arg))
        self.generic_visit(node)

    def visit_Attribute(self, node):
        chain = _chain_of(node)
        if chain:
            self._add(chain)             # its inner nodes are its prefixes
        else:
            self.generic_visit(node)

    def visit_ImportFrom(self, node):
        package, *sub = (node.module or "").split(".")
        root = {v: k for k, v in CUPY_PACKAGES.items()}.get(package)
        if root and node.level == 0:
            for alias in node.names:
                if alias.name != "*":
                    self._add(".".join([root, *sub, alias.name]))


def find_chains(source):
    """``{chain: keywords}`` for the cp./cpx. chains in Python ``source``."""
    finder = _ChainFinder()
    finder.visit(ast.parse(source))
    return finder.chains


def book_sources(book=BOOK):
    """``(where, python)`` for each notebook code cell and helper module."""
    for path in sorted(book.rglob("*.ipynb")):
        rel = path.relative_to(book)
        if {"_build", ".ipynb_checkpoints"} & set(rel.parts):
            continue
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for number, cell in enumerate(cells, start=1):
            if cell.get("cell_type") == "code":
                source = cell.get("source", "")
                if isinstance(source, list):
                    source = "".join(source)
                yield f"{rel} cell {number}", strip_magics(source)
    src = book / "src"
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src)
        if rel.parts[0] == "cpudevice" or rel == Path("backend.py"):
            continue
        yield f"src/{rel.as_posix()}", path.read_text(encoding="utf-8")


@functools.lru_cache(maxsize=None)
def walk_book(book=BOOK):
    """``(keywords, where, errors)``: ``{chain: keywords}``, ``{chain:
    [where used]}``, and ``["where: error"]`` for code that does not parse."""
    keywords, where, errors = {}, {}, []
    for place, source in book_sources(book):
        try:
            found = find_chains(source)
        except SyntaxError as e:
            errors.append(f"{place}: {type(e).__name__}: {e}")
            continue
        for chain, kws in found.items():
            keywords.setdefault(chain, set()).update(kws)
            where.setdefault(chain, []).append(place)
    return keywords, where, errors




# --- resolving chains --------------------------------------------------------

class Missing(LookupError):
    """A chain does not resolve; ``args[0]`` is its first missing prefix."""


def resolve(root, chain):
    """The object ``chain`` names below ``root`` (the object for its first
    name): attributes first, then submodules (``cupyx.profiler`` must be
    imported). Raises `Missing` with the first prefix that is not there."""
    obj, names = root, chain.split(".")
    for i, name in enumerate(names[1:], start=2):
        try:
            obj = getattr(obj, name)
            continue
        except AttributeError:
            pass
        if isinstance(obj, types.ModuleType):
            module = f"{obj.__name__}.{name}"
            try:
                obj = importlib.import_module(module)
                continue
            except ModuleNotFoundError as e:    # not: one it imports
                if not (module + ".").startswith(f"{e.name}."):
                    raise
        raise Missing(".".join(names[:i]))
    return obj


# --- signatures --------------------------------------------------------------

def sig_of(params):
    """A Signature from a parameter list as in a def: ``"(a, *, b=1)"``."""
    namespace = {}
    exec(f"def f{params}: pass", namespace)    # only this file's constants
    return inspect.signature(namespace["f"])


# CuPy's parameters for the book's most used callables that inspect cannot
# read (Cython builtins), as in CuPy v14.2.0's source (file: definition).
# ``also``: a literal form the model may copy instead of the documented one.
CUPY_SIGNATURES = {
    # cupy/_core/core.pyx: `class ndarray` documents
    #   __init__(shape, dtype=float, memptr=None, strides=None, order='C')
    # (its Python signature is a pass-through (*args, _obj=None,
    # _no_init=False, **kwargs) to _ndarray_base._init, which has these).
    "cp.ndarray": "(shape, dtype=float, memptr=None, strides=None, order='C')",
    # cpdef get(self, stream=None, order='C', out=None, blocking=True)
    "cp.ndarray.get": "(stream=None, order='C', out=None, blocking=True)",
    # cpdef set(self, arr, stream=None)
    "cp.ndarray.set": "(arr, stream=None)",
    # cpdef _ndarray_base astype(self, dtype, order='K', casting=None,
    #                            subok=None, copy=True)
    "cp.ndarray.astype": "(dtype, order='K', casting=None, subok=None,"
                         " copy=True)",
    # cpdef _ndarray_base copy(self, order='C')
    "cp.ndarray.copy": "(order='C')",
    # cpdef item(self)
    "cp.ndarray.item": "()",
    # cpdef _ndarray_base sum(self, axis=None, dtype=None, out=None,
    #                         keepdims=False)
    "cp.ndarray.sum": "(axis=None, dtype=None, out=None, keepdims=False)",
    # cupy/cuda/device.pyx: cdef class Device: def __init__(self, device=None)
    "cp.cuda.Device": "(device=None)",
    "cp.cuda.Device.use": "()",                 # cpdef use(self)
    "cp.cuda.Device.synchronize": "()",         # cpdef synchronize(self)
    # cupy/cuda/stream.pyx: class Event: def record(self, stream=None)
    # (readable in 14.2; kept so the table is checked against inspect)
    "cp.cuda.Event.record": "(stream=None)",
    # def get_elapsed_time(start_event, end_event)
    "cp.cuda.get_elapsed_time": "(start_event, end_event)",
    # cpdef get_current_stream(int device_id=-1)
    "cp.cuda.get_current_stream": "(device_id=-1)",
    # cupy_backends/cuda/api/runtime.pyx (re-exported by cupy/cuda/runtime.py)
    "cp.cuda.runtime.getDeviceCount": "()",     # cpdef int getDeviceCount()
    "cp.cuda.runtime.getDeviceProperties": "(device)",  # (int device)
    "cp.cuda.runtime.memGetInfo": "()",         # cpdef memGetInfo()
    # cupy/cuda/memory.pyx: cdef class MemoryPool: def __init__ and cpdefs
    "cp.cuda.MemoryPool": "(allocator=None)",
    "cp.cuda.MemoryPool.free_all_blocks": "(stream=None)",
    "cp.cuda.MemoryPool.n_free_blocks": "()",
    "cp.cuda.MemoryPool.used_bytes": "()",
    "cp.cuda.MemoryPool.free_bytes": "()",
    "cp.cuda.MemoryPool.total_bytes": "()",
    "cp.cuda.MemoryPool.set_limit": "(size=None, fraction=None)",
    "cp.cuda.MemoryPool.get_limit": "()",
    # cupy/cuda/memory.pyx: the allocators. cpdef set_allocator(
    #   allocator=None), cpdef get_allocator(), cpdef MemoryPointer
    #   alloc(size), malloc_async(size_t size), malloc_managed(size_t size)
    "cp.cuda.set_allocator": "(allocator=None)",
    "cp.cuda.get_allocator": "()",
    "cp.cuda.alloc": "(size)",
    "cp.cuda.malloc_async": "(size)",
    "cp.cuda.malloc_managed": "(size)",
    # cupy/cuda/__init__.py: def using_allocator(allocator=None)
    "cp.cuda.using_allocator": "(allocator=None)",
    # cdef class Memory: def __init__(self, size_t size); MemoryAsync:
    #   def __init__(self, size_t size, stream); ManagedMemory:
    #   def __init__(self, size_t size), def prefetch(self, stream, *,
    #   int device_id=runtime.cudaInvalidDeviceId), def advise(self,
    #   int advise, device.Device dev)
    "cp.cuda.Memory": "(size)",
    "cp.cuda.MemoryAsync": "(size, stream)",
    "cp.cuda.ManagedMemory": "(size)",
    "cp.cuda.ManagedMemory.prefetch": "(stream, *, device_id=-2)",
    "cp.cuda.ManagedMemory.advise": "(advise, dev)",
    # cdef class MemoryAsyncPool: def __init__(self,
    #   pool_handles='current') and its cpdefs
    "cp.cuda.MemoryAsyncPool": "(pool_handles='current')",
    "cp.cuda.MemoryAsyncPool.malloc": "(size)",
    "cp.cuda.MemoryAsyncPool.free_all_blocks": "(stream=None)",
    "cp.cuda.MemoryAsyncPool.n_free_blocks": "()",
    "cp.cuda.MemoryAsyncPool.used_bytes": "()",
    "cp.cuda.MemoryAsyncPool.free_bytes": "()",
    "cp.cuda.MemoryAsyncPool.total_bytes": "()",
    "cp.cuda.MemoryAsyncPool.set_limit": "(size=None, fraction=None)",
    "cp.cuda.MemoryAsyncPool.get_limit": "()",
    # cupy_backends/cuda/api/runtime.pyx: the memory calls under them
    "cp.cuda.runtime.deviceGetAttribute": "(attrib, device)",
    "cp.cuda.runtime.mallocManaged": "(size, flags=1)",  # cudaMemAttachGlobal
    "cp.cuda.runtime.mallocAsync": "(size, stream)",
    "cp.cuda.runtime.freeAsync": "(ptr, stream)",
    "cp.cuda.runtime.memPrefetchAsync": "(devPtr, count, dstDevice, stream)",
    "cp.cuda.runtime.memAdvise": "(devPtr, count, advice, device)",
    "cp.cuda.runtime.deviceGetDefaultMemPool": "(device)",
    "cp.cuda.runtime.deviceGetMemPool": "(device)",
    "cp.cuda.runtime.deviceSetMemPool": "(device, pool)",
    "cp.cuda.runtime.memPoolTrimTo": "(pool, size)",
    "cp.cuda.runtime.memPoolGetAttribute": "(pool, attr)",
    "cp.cuda.runtime.memPoolSetAttribute": "(pool, attr, value)",
    # cupy/cuda/pinned_memory.pyx:
    #   cpdef PinnedMemoryPointer alloc_pinned_memory(size_t size)
    "cp.cuda.alloc_pinned_memory": "(size)",
    # cpdef free_all_blocks(self), cpdef n_free_blocks(self)
    "cp.cuda.PinnedMemoryPool.free_all_blocks": "()",
    "cp.cuda.PinnedMemoryPool.n_free_blocks": "()",
    # cupy/cuda/graph.pyx: cdef class Graph: cpdef launch(self, stream=None)
    "cp.cuda.graph.Graph.launch": "(stream=None)",
    # Interop (issue 50). cupy/_core/core.pyx: def __dlpack__(self, *,
    #   stream=None, tuple max_version=None, dl_device=None, copy=None),
    #   def __dlpack_device__(self), cpdef object toDlpack(self);
    # cupy/_core/dlpack.pyx: def from_dlpack(array, *, device=None,
    #   copy=None), cpdef _ndarray_base fromDlpack(object dltensor)
    "cp.ndarray.__dlpack__": "(*, stream=None, max_version=None,"
                             " dl_device=None, copy=None)",
    "cp.ndarray.__dlpack_device__": "()",
    "cp.ndarray.toDlpack": "()",
    "cp.from_dlpack": "(array, *, device=None, copy=None)",
    "cp.fromDlpack": "(dltensor)",
    # cupy/cuda/stream.pyx: def from_external(cls, obj) (a classmethod),
    #   class ExternalStream: def __init__(self, ptr, device_id=-1)
    "cp.cuda.Stream.from_external": "(obj)",
    "cp.cuda.ExternalStream": "(ptr, device_id=-1)",
    # cupy/cuda/memory.pyx: cdef class UnownedMemory: def __init__(self,
    #   intptr_t ptr, size_t size, object owner, int device_id=-1); the
    #   cpdefs of MemoryPointer
    "cp.cuda.UnownedMemory": "(ptr, size, owner, device_id=-1)",
    "cp.cuda.MemoryPointer.copy_from_device": "(src, size)",
    "cp.cuda.MemoryPointer.copy_from_device_async": "(src, size,"
                                                    " stream=None)",
    "cp.cuda.MemoryPointer.copy_from_host": "(mem, size)",
    "cp.cuda.MemoryPointer.copy_from_host_async": "(mem, size, stream=None)",
    "cp.cuda.MemoryPointer.copy_from": "(mem, size)",
    "cp.cuda.MemoryPointer.copy_from_async": "(mem, size, stream=None)",
    "cp.cuda.MemoryPointer.copy_to_host": "(mem, size)",
    "cp.cuda.MemoryPointer.copy_to_host_async": "(mem, size, stream=None)",
    "cp.cuda.MemoryPointer.memset": "(value, size)",
    "cp.cuda.MemoryPointer.memset_async": "(value, size, stream=None)",
    # cupy_backends/cuda/api/runtime.pyx: cpdef PointerAttributes
    #   pointerGetAttributes(intptr_t ptr), cpdef intptr_t streamCreate(),
    #   cpdef streamDestroy(intptr_t stream), streamSynchronize(same)
    "cp.cuda.runtime.pointerGetAttributes": "(ptr)",
    "cp.cuda.runtime.streamCreate": "()",
    "cp.cuda.runtime.streamDestroy": "(stream)",
    "cp.cuda.runtime.streamSynchronize": "(stream)",
    # cupy/_core/_kernel.pyx: cdef class ElementwiseKernel:
    #   def __init__(self, in_params, out_params, operation, name='kernel',
    #       reduce_dims=True, preamble='', no_return=False,
    #       return_tuple=False, **kwargs)
    # where **kwargs reach _get_elementwise_kernel(..., loop_prep='',
    # after_loop='', options=()) by keyword (documented in its docstring).
    "cp.ElementwiseKernel": dict(
        sig="(in_params, out_params, operation, name='kernel',"
            " reduce_dims=True, preamble='', no_return=False,"
            " return_tuple=False, *, loop_prep='', after_loop='',"
            " options=())",
        also=["(in_params, out_params, operation, name='kernel',"
              " reduce_dims=True, preamble='', no_return=False,"
              " return_tuple=False, **kwargs)"]),
    # cupy/_core/_reduction.pyx: cdef class ReductionKernel: def __init__
    "cp.ReductionKernel": "(in_params, out_params, map_expr, reduce_expr,"
                          " post_map_expr, identity, name='reduce_kernel',"
                          " reduce_type=None, reduce_dims=True, preamble='',"
                          " options=())",
    # cupy/_core/raw.pyx: cdef class RawKernel:
    #   def __init__(self, str code, str name, tuple options=(),
    #       str backend='nvrtc', *, bint translate_cucomplex=False,
    #       bint enable_cooperative_groups=False, object jitify=None)
    "cp.RawKernel": "(code, name, options=(), backend='nvrtc', *,"
                    " translate_cucomplex=False,"
                    " enable_cooperative_groups=False, jitify=None)",
    # cupy/_core/fusion.pyx: def fuse(*args, **kwargs), documented keyword
    # kernel_name (wrapper(f, kernel_name=None)). Optional in the model.
    "cp.fuse": dict(sig="(*args, kernel_name=None)",
                    also=["(*args, **kwargs)"], required=False),
}


def table_entry(path):
    """``(documented Signature, [forms the model may have], required)``."""
    entry = CUPY_SIGNATURES[path]
    if isinstance(entry, str):
        entry = dict(sig=entry)
    documented = sig_of(entry["sig"])
    alternatives = [documented] + [sig_of(s) for s in entry.get("also", ())]
    return documented, alternatives, entry.get("required", True)


def _params(sig):
    """The parameters of ``sig``, without a leading ``self``/``cls``."""
    params = list(sig.parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    return params


def plain(sig):
    """``sig`` as text, without ``self`` and annotations."""
    return str(inspect.Signature(
        [p.replace(annotation=P.empty) for p in _params(sig)]))


def readable_signature(obj):
    """inspect's signature of ``obj``; None when there is none, or when it is
    only ``(*args, **kwargs)``."""
    if not callable(obj):
        return None
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    kinds = [p.kind for p in _params(sig)]
    if kinds == [P.VAR_POSITIONAL, P.VAR_KEYWORD]:
        return None
    return sig


def _documented(obj, cupy_roots):
    """The `CUPY_SIGNATURES` path whose CuPy object is ``obj``, or None."""
    for path in CUPY_SIGNATURES:
        try:
            if resolve(cupy_roots[path.split(".")[0]], path) is obj:
                return path
        except Missing:
            pass
    return None


def cupy_signatures(obj, cupy_roots):
    """``(CuPy's signature of obj, [forms the model may have])``: from the
    table where it has ``obj``, else inspect's; ``(None, [])`` if neither."""
    path = _documented(obj, cupy_roots)
    if path:
        documented, alternatives, _ = table_entry(path)
        return documented, alternatives
    sig = readable_signature(obj)
    return sig, [sig] if sig else []


def _is_literal(value):
    if isinstance(value, tuple):
        return all(map(_is_literal, value))
    return value is None or type(value) in (bool, int, float, str, bytes)


def signature_differences(cupy_sig, model_sig):
    """How ``model_sig`` differs from ``cupy_sig``: names, order, kinds,
    required-or-not, and defaults where both are plain literals. ``[]`` when
    they agree. The names of ``*args``/``**kwargs`` do not matter."""
    def shape(sig):
        out = []
        for p in _params(sig):
            name = {P.VAR_POSITIONAL: "*", P.VAR_KEYWORD: "**"}.get(
                p.kind, p.name)
            out.append((name, p))
        return dict(out)

    cupy, model = shape(cupy_sig), shape(model_sig)
    diffs = []
    missing = [n for n in cupy if n not in model]
    extra = [n for n in model if n not in cupy]
    if missing:
        diffs.append(f"the model lacks {', '.join(missing)}")
    if extra:
        diffs.append(f"the model adds {', '.join(extra)}")
    common = [n for n in cupy if n in model]
    if [n for n in model if n in cupy] != common:
        diffs.append("the parameters are in another order")
    for name in common:
        c, m = cupy[name], model[name]
        if c.kind != m.kind:
            diffs.append(f"{name} is {c.kind.description} in CuPy, "
                         f"{m.kind.description} in the model")
        elif (c.default is P.empty) != (m.default is P.empty):
            need = "required" if c.default is P.empty else "optional"
            diffs.append(f"{name} is {need} in CuPy, not in the model")
        elif (_is_literal(c.default) and _is_literal(m.default) and (
                (type(c.default), c.default) != (type(m.default), m.default))):
            diffs.append(f"{name} defaults to {c.default!r} in CuPy, "
                         f"{m.default!r} in the model")
    return diffs


def accepts_keyword(sig, keyword):
    params = _params(sig)
    return any(p.kind is P.VAR_KEYWORD for p in params) or any(
        p.name == keyword and p.kind in (P.POSITIONAL_OR_KEYWORD,
                                          P.KEYWORD_ONLY) for p in params)


# --- the contract, as lists of problems --------------------------------------

def cupy_problems(chain, keywords, cupy_roots):
    """What is wrong with the book's ``chain`` on CuPy's side ([]: nothing)."""
    root = chain.split(".")[0]
    try:
        obj = resolve(cupy_roots[root], chain)
    except Missing as e:
        package = (f"CuPy {cupy_roots['cp'].__version__}" if root != "nvml"
                   else "pynvml (nvidia-ml-py)")
        return [f"{package} has no {e.args[0]}"]
    sig, _ = cupy_signatures(obj, cupy_roots)
    if sig is None:
        return []
    return [f"the book passes {kw}=, but CuPy's {chain}{plain(sig)} has no "
            f"such parameter" for kw in sorted(keywords)
            if not accepts_keyword(sig, kw)]


def model_problems(chain, keywords, cupy_roots, model_roots):
    """What is wrong with ``chain`` in the model, measured against CuPy."""
    try:
        model_obj = resolve(model_roots[chain.split(".")[0]], chain)
    except Missing as e:
        return [f"the model has no {e.args[0]}"]
    try:
        cupy_obj = resolve(cupy_roots[chain.split(".")[0]], chain)
    except Missing:
        return []                      # test_cupy_has reports it
    problems = []
    if inspect.isclass(cupy_obj) != inspect.isclass(model_obj) or (
            callable(cupy_obj) != callable(model_obj)):
        def what(obj):
            return ("a class" if inspect.isclass(obj) else
                    "a callable, not a class" if callable(obj) else
                    f"a {type(obj).__name__} object")
        problems.append(f"CuPy's is {what(cupy_obj)}, "
                        f"the model's is {what(model_obj)}")
    if inspect.isclass(cupy_obj) and issubclass(cupy_obj, BaseException):
        builtin = [b for b in cupy_obj.__mro__ if b.__module__ == "builtins"]
        lacking = [b.__name__ for b in builtin if not (
            inspect.isclass(model_obj) and issubclass(model_obj, b))]
        if lacking:
            problems.append(f"CuPy's is a subclass of {', '.join(lacking)}; "
                            "the model's is not")
    cupy_sig, alternatives = cupy_signatures(cupy_obj, cupy_roots)
    model_sig = readable_signature(model_obj)
    if cupy_sig is not None and model_sig is not None and not any(
            not signature_differences(s, model_sig) for s in alternatives):
        problems.append(
            f"CuPy has {chain}{plain(cupy_sig)}, the model has "
            f"{chain}{plain(model_sig)}: "
            + "; ".join(signature_differences(cupy_sig, model_sig)))
    if model_sig is not None:
        problems += [f"the book passes {kw}=, but the model's "
                     f"{chain}{plain(model_sig)} has no such parameter"
                     for kw in sorted(keywords)
                     if not accepts_keyword(model_sig, kw)]
    return problems


def report(chain, problems, where):
    """A failure's text: the chain, up to three places using it, the
    problems. ``where`` is `walk_book`'s ``{chain: [place]}``."""
    places = where.get(chain, [])
    used = ", ".join(places[:3]) + (" ..." if len(places) > 3 else "")
    return (f"{chain} (used in {used or '-'}):\n  " + "\n  ".join(problems))
