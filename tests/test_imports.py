"""The house's imports: no circle anywhere, and the CPU device model's layers.

Every Python file of ``book/src``, ``benchmarks/`` and ``tools/`` (the tests
aside) is read with `ast`, and each import is an edge from its module to
the module it names, with two rules:

* ``from . import X`` (and ``from .pkg import X``, ``from pkg import X``)
  is an edge to the submodule ``X`` when there is one, not to the package:
  otherwise a package's ``__init__``, which imports its submodules, would
  fuse them all into one false circle;
* an import inside a function counts, as one at the top does: it closes a
  circle as surely, only later.

A module's name is its path below the folder on ``sys.path`` when it runs:
``book`` for ``src.*``, ``benchmarks/`` and ``tools/`` for their scripts
(``from energy_ceiling import ...``); ``benchmarks.x`` and ``tools.x`` name
them too. Imports of anything else (the standard library, NumPy) are not
edges.

`LAYERS` are the CPU device model's layers (``book/src/cpudevice``,
README.md there): a module imports only modules of the layers below its
own, or those before it in its own layer. Each check is also run on a tiny
tree in ``tmp_path`` that breaks it, to show that it can fail.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the folders walked, each with the folder its module names start from
TREES = {"book/src": "book", "benchmarks": "benchmarks", "tools": "tools"}
MODEL = "src.cpudevice"

# The CPU device model's layers, bottom first; in each, a module imports only
# those before it (names below `MODEL`; "" is the package's ``__init__``).
LAYERS = [
    ("hardware", ["_profile", "_errors", "_fork", "_clock", "_queue",
                  "_hardware"]),
    ("runtime", ["cuda.runtime", "cuda.device", "cuda.memory_hook",
                 "cuda.pinned_memory", "cuda.base_memory", "cuda.graph",
                 "cuda.stream", "cuda.handles", "cuda.memory",
                 "cuda.allocator", "cuda.memory_async", "cuda.managed",
                 "cuda"]),
    ("arrays", ["_util", "_csemantics", "_csyntax", "_ccompile",
                "_ctranslate", "_core", "_copies", "_ndarray", "_cai",
                "_dlpack", "_creation", "_cub", "_routines", "_kernel",
                "random"]),
    ("cupyx", ["cupyx.profiler", "cupyx"]),
    ("namespace", [""]),
]
# The arrows from the model into the rest of the book: a lesson's raw CUDA
# kernel runs on the model through its registered CPU twin; the model's
# errors show the reader's lines in a notebook as the book's helpers' do.
MODEL_MAY_IMPORT = {(f"{MODEL}._kernel", "src.twins"),
                    (f"{MODEL}._errors", "src._tracebacks")}


def _files(root, trees=TREES):
    """Every Python file of the trees, relative to ``root``."""
    return sorted({p.relative_to(root).as_posix()
                   for tree in trees for p in (root / tree).rglob("*.py")})


def _names(rel, trees=TREES):
    """The module names of file ``rel``: its path below the folder its
    tree's names start from (`TREES`), then below the root."""
    for tree, base in trees.items():
        if rel.startswith(tree + "/"):
            names = []
            for start in (Path(base), Path()):
                parts = list(Path(rel).with_suffix("").parts)
                parts = parts[len(start.parts):]
                if parts[-1] == "__init__":
                    parts.pop()
                if parts:
                    names.append(".".join(parts))
            return names
    raise ValueError(f"{rel} is in no tree of {sorted(trees)}")


def _name_of(rel, trees=TREES):
    """The module's own name (the first of `_names`)."""
    return _names(rel, trees)[0]


def modules(root, trees=TREES):
    """``{module name: path relative to root}``, a file under each of its
    names (``x`` and ``benchmarks.x``; a package before a module of its
    name, as Python finds them)."""
    found = {}
    for rel in _files(root, trees):
        for name in _names(rel, trees):
            if name not in found or rel.endswith("/__init__.py"):
                found[name] = rel
    return found


def _known(name, table):
    """The longest prefix of the dotted ``name`` that is a module here."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in table:
            return prefix
    return None


def imports(root, rel, table, trees=TREES):
    """``[(module imported, line)]`` for every import in file ``rel``,
    those inside functions too."""
    name = _name_of(rel, trees)
    package = name if rel.endswith("__init__.py") else name.rpartition(".")[0]
    tree = ast.parse((root / rel).read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [_known(a.name, table) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            full = [f"{base}.{a.name}" if base else a.name
                    for a in node.names]
            targets = [f if f in table else _known(base, table)
                       for f in full]
        else:
            continue
        found += [(t, node.lineno) for t in targets if t is not None]
    return found


def graph(root, trees=TREES):
    """``{module: {module it imports: first line}}``, by the modules' own
    names."""
    table = modules(root, trees)
    edges = {}
    for rel in _files(root, trees):
        src = _name_of(rel, trees)
        out = edges.setdefault(src, {})
        for target, line in imports(root, rel, table, trees):
            target = _name_of(table[target], trees)
            if target != src:
                out.setdefault(target, f"{rel}:{line}")
    return edges


def circles(edges):
    """Each import circle, as the modules around it (the first repeated at
    the end), one per group of modules that reach one another."""
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(v):                       # Tarjan's strongly connected parts
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(set(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_one_circle(edges, group) for group in groups]


def _one_circle(edges, group):
    """A path around ``group`` from its first module back to it."""
    start = min(group)
    paths = {start: [start]}
    todo = [start]
    while todo:                         # breadth first: a shortest circle
        v = todo.pop(0)
        for w in sorted(edges.get(v, ())):
            if w == start:
                return paths[v] + [start]
            if w in group and w not in paths:
                paths[w] = paths[v] + [w]
                todo.append(w)
    raise AssertionError(f"no circle in {group}")


def upward(edges):
    """Each import of a model module that points up its layers (or sideways
    to a later module of its layer), to a module not in `LAYERS`, or from
    the model out of it (but `MODEL_MAY_IMPORT`)."""
    rank = {f"{MODEL}.{m}".rstrip("."): (i, j)
            for i, (_, names) in enumerate(LAYERS)
            for j, m in enumerate(names)}
    layer = {f"{MODEL}.{m}".rstrip("."): name
             for name, names in LAYERS for m in names}
    wrong = []
    for src, out in sorted(edges.items()):
        if not (src == MODEL or src.startswith(MODEL + ".")):
            continue
        if src not in rank:
            wrong.append(f"{src} is in no layer of LAYERS")
            continue
        for target, where in sorted(out.items()):
            inside = target == MODEL or target.startswith(MODEL + ".")
            if not inside:
                if (target == "src" or target.startswith("src.")) and \
                        (src, target) not in MODEL_MAY_IMPORT:
                    wrong.append(f"{where}: {src} imports {target}, outside "
                                 "the model")
            elif target not in rank:
                wrong.append(f"{where}: {target} is in no layer of LAYERS")
            elif rank[target] >= rank[src]:
                how = "above it" if layer[target] != layer[src] else \
                    "after it in its layer"
                wrong.append(f"{where}: {src} ({layer[src]}) imports "
                             f"{target} ({layer[target]}), {how}")
    return wrong


# -- the house ----------------------------------------------------------------

def test_no_import_circle():
    found = circles(graph(ROOT))
    assert not found, "import circles: " + "; ".join(
        " -> ".join(c) for c in found)


def test_the_models_imports_point_down_its_layers():
    assert not upward(graph(ROOT))


def test_every_layer_names_a_module_that_exists():
    table = modules(ROOT)
    missing = [m for _, names in LAYERS for m in names
               if f"{MODEL}.{m}".rstrip(".") not in table]
    assert not missing


def test_the_real_tree_has_the_edges_the_rules_make():
    """Submodule edges and edges from inside functions are read: the
    package's ``__init__`` imports ``cuda``, the submodule; `src`'s
    ``__init__`` reaches the model's hardware from inside a function; and
    ``from . import cpudevice`` names the package."""
    edges = graph(ROOT)
    assert f"{MODEL}.cuda" in edges[MODEL]
    assert f"{MODEL}._hardware" in edges["src"]
    assert MODEL in edges["src.nvmlmodel"]


# -- each check fails where it should -----------------------------------------

def _tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return graph(root)


def test_a_circle_through_an_import_in_a_function_is_found(tmp_path):
    edges = _tree(tmp_path, {
        "book/src/__init__.py": "",
        "book/src/pkg/__init__.py": "from . import a, b\n",
        "book/src/pkg/a.py": "from . import b\n",
        "book/src/pkg/b.py": "def f():\n    from .a import x\n",
        "benchmarks/run.py": "import numpy\nfrom src.pkg import a\n",
    })
    assert circles(edges) == [["src.pkg.a", "src.pkg.b", "src.pkg.a"]]
    assert set(edges["run"]) == {"src.pkg.a"}


def test_a_circle_in_a_package_of_scripts_is_found(tmp_path):
    """A package beside the scripts of ``benchmarks/`` is named as they
    import it (``from fidelitykit import ...``), by ``benchmarks.`` too."""
    edges = _tree(tmp_path, {
        "benchmarks/fidelity.py": "from fidelitykit import effects\n",
        "benchmarks/fidelitykit/__init__.py": "from . import effects\n",
        "benchmarks/fidelitykit/effects.py": "from .runner import run\n",
        "benchmarks/fidelitykit/runner.py":
            "def run():\n    from benchmarks.fidelitykit import effects\n",
    })
    assert set(edges["fidelity"]) == {"fidelitykit.effects"}
    assert circles(edges) == [["fidelitykit.effects", "fidelitykit.runner",
                               "fidelitykit.effects"]]


def test_a_package_importing_its_submodules_is_no_circle(tmp_path):
    """``from . import X`` in ``__init__`` is an edge to the submodule, and
    ``from .pkg import X`` too: no circle through the package."""
    edges = _tree(tmp_path, {
        "book/src/__init__.py": "from .pkg import a\n",
        "book/src/pkg/__init__.py": "from . import a, b\nfrom .a import y\n",
        "book/src/pkg/a.py": "from . import b\nfrom .b import x\n",
        "book/src/pkg/b.py": "import os\n",
        "tools/t.py": "from src.pkg import b\n",
    })
    assert circles(edges) == []
    assert set(edges["src.pkg"]) == {"src.pkg.a", "src.pkg.b"}
    assert set(edges["src"]) == {"src.pkg.a"}
    assert set(edges["t"]) == {"src.pkg.b"}


def test_a_package_imported_by_its_submodule_is_a_circle(tmp_path):
    """A submodule that imports a name of its package's ``__init__`` (not a
    submodule) depends on the package, which imports it."""
    edges = _tree(tmp_path, {
        "book/src/__init__.py": "",
        "book/src/pkg/__init__.py": "from .a import x\nY = 1\n",
        "book/src/pkg/a.py": "from . import Y\n",
    })
    assert circles(edges) == [["src.pkg", "src.pkg.a", "src.pkg"]]


def test_an_import_up_the_layers_is_found(tmp_path):
    model = "book/src/cpudevice"
    edges = _tree(tmp_path, {
        "book/src/__init__.py": "",
        "book/src/twins.py": "",
        "book/src/timing.py": "",
        f"{model}/__init__.py": "from . import _core\n",
        f"{model}/_clock.py": "from . import _profile\n",
        f"{model}/_profile.py": "def f():\n    from .cuda import runtime\n",
        f"{model}/cuda/__init__.py": "",
        f"{model}/cuda/runtime.py": "from .. import _hardware\n",
        f"{model}/_hardware.py": "from ._queue import Queue\n",
        f"{model}/_queue.py": "from ._clock import clock\n",
        f"{model}/_kernel.py": "from .. import twins, timing\n",
        f"{model}/_new.py": "",
    })
    assert sorted(upward(edges)) == [
        "book/src/cpudevice/_kernel.py:1: src.cpudevice._kernel imports "
        "src.timing, outside the model",
        "book/src/cpudevice/_profile.py:2: src.cpudevice._profile "
        "(hardware) imports src.cpudevice.cuda.runtime (runtime), above it",
        "src.cpudevice._new is in no layer of LAYERS",
    ]
