"""Test selection: the tests that could notice a mutant, from the coverage
map, and for a line run at import the tests that use what it defines."""
import ast
import re

from . import SRC


def _module_names(file):
    """How code refers to a module of book/src: `src.x.y` and its last
    name (a lesson writes `from src import timing`)."""
    mod = file[len("book/"):-len(".py")].replace("/", ".")
    mod = mod[:-len(".__init__")] if mod.endswith(".__init__") else mod
    return mod, mod.rsplit(".", 1)[-1]


def _reexporters(root, mod):
    """The modules of book/src that re-export names of `mod`: they import
    them at module level and do not use them (`src.kernels` the names of
    `src.energy` and `src.specs`, the package `src.reference` those of its
    modules), so code that imports them reaches `mod`; and theirs, in turn.
    """
    modules = {}
    for path in sorted((root / SRC).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        modules[_module_names(rel)[0]] = rel
    found, todo = set(), [mod]
    while todo:
        target = todo.pop()
        for name, rel in modules.items():
            if name in found or name in (mod, "src"):
                continue
            tree = _tree(root, rel)
            package = name if rel.endswith("/__init__.py") else \
                name.rpartition(".")[0]
            used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
            for node in tree.body:
                if not isinstance(node, ast.ImportFrom):
                    continue
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - node.level + 1]
                    base = ".".join(parts + [base] if base else parts)
                if base == target and any(
                        (a.asname or a.name) not in used for a in node.names):
                    found.add(name)
                    todo.append(name)
                    break
    return found


def relevant_suite(root, file, cmap):
    """Every test file and lesson that imports the module, or a module that
    re-exports its names (the CPU model: everything, as `from src import
    cp` reaches it)."""
    mod, _ = _module_names(file)
    if mod.startswith("src.cpudevice") or mod == "src":
        pat = re.compile(r"\bsrc\b")
    else:
        alternatives = []
        for name in [mod, *sorted(_reexporters(root, mod))]:
            last = name.rsplit(".", 1)[-1]
            alternatives.append(rf"\b{re.escape(name)}\b|from src import "
                                rf".*\b{re.escape(last)}\b")
        pat = re.compile("|".join(alternatives))
    files = set()
    for p in sorted((root / "tests").rglob("test_*.py")) + sorted(
            (root / "book").glob("[0-9][0-9]_*.ipynb")):
        if pat.search(p.read_text(encoding="utf-8")):
            files.add(p.relative_to(root).as_posix())
    return sorted(t for t in cmap["tests"] if t.split("::")[0] in files)


def _users(root, m, cmap):
    """For a line run only at import: the tests that run the code using
    what it defines (a module or class constant's readers, a function's
    body for its defaults and decorators)."""
    tree = _tree(root, m.file)
    names, bodies = set(), []
    for node in ast.walk(tree):
        if not hasattr(node, "lineno") or not isinstance(node, ast.stmt):
            continue
        if not (node.lineno <= m.line <= node.end_lineno):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body_start = node.body[0].lineno
            if m.line < body_start:
                bodies.append((body_start, node.end_lineno))
                names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [
                node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
                    elif isinstance(n, ast.Attribute):
                        names.add(n.attr)
    tests = set()
    by_line = cmap["lines"].get(m.file, {})
    for a, b in bodies:
        for ln in range(a, b + 1):
            tests.update(by_line.get(str(ln), []))
    if names:
        for path in sorted((root / SRC).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            t = _tree(root, rel)
            file_lines = cmap["lines"].get(rel, {})
            for n in ast.walk(t):
                used = ((isinstance(n, ast.Name) and n.id in names
                         and isinstance(n.ctx, ast.Load))
                        or (isinstance(n, ast.Attribute) and n.attr in names
                            and isinstance(n.ctx, ast.Load)))
                if used:
                    tests.update(file_lines.get(str(n.lineno), []))
    return tests


def select(root, m, cmap, uncovered="skip"):
    """(tests, how): the tests that could notice mutant `m`."""
    tests = set(cmap["lines"].get(m.file, {}).get(str(m.line), []))
    how = "coverage"
    if _import_time(_tree(root, m.file), m.line):
        # the main pytest process imported it while collecting, in no
        # test: add the tests that run what the line defines
        users = _users(root, m, cmap)
        if users - tests:
            how = "coverage + users of an import-time line"
        tests |= users
    elif m.line in cmap.get("at_import", {}).get(m.file, ()):
        # a function's body that ran while the module was imported (a
        # helper building module constants, a profile loaded at import):
        # what it built is used by tests that need not run the line; run
        # the module's suite (for the CPU model: everything)
        suite = set(relevant_suite(root, m.file, cmap))
        if suite - tests:
            how = "coverage + its module's suite (run at import)"
        tests |= suite
    if not tests:
        if uncovered == "run":
            tests = set(relevant_suite(root, m.file, cmap))
            how = "not run by any test: relevant suite"
        else:
            how = "not run by any test or lesson"
    known = cmap["tests"]
    tests = [t for t in tests if known.get(t, {}).get("passed", False)]
    tests.sort(key=lambda t: (known[t]["seconds"], t))
    return tests, how


_TREES = {}


def _tree(root, file):
    if (root, file) not in _TREES:
        _TREES[root, file] = ast.parse(
            (root / file).read_text(encoding="utf-8"))
    return _TREES[root, file]


def _import_time(tree, line):
    """Is `line` run when its module is imported (module and class bodies,
    a def's decorators and defaults) rather than when a function runs?"""
    body = tree.body
    while True:
        for node in body:
            first = min([node.lineno] + [d.lineno for d in getattr(
                node, "decorator_list", [])])
            if first <= line <= node.end_lineno:
                break
        else:
            return False
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return line < node.body[0].lineno
        inner = [b for field in ("body", "orelse", "finalbody", "handlers")
                 for b in getattr(node, field, None) or []]
        inner = [b for h in inner
                 for b in (h.body if isinstance(h, ast.ExceptHandler)
                           else [h])]
        if not any(b.lineno <= line <= b.end_lineno or
                   isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef,
                                  ast.ClassDef)) and b.decorator_list and
                   min(d.lineno for d in b.decorator_list) <= line
                   for b in inner):
            return True                     # a header: `if x:`, `class C:`
        body = inner

