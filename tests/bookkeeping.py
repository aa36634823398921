"""The book's own machinery in the code a reader sees, measured per lesson.

A *bookkeeping* line is a visible code line that calls ``glue``, calls the
reference (``ref.…``, ``Lesson(…)``), or builds the words a sentence will
say: a string assigned to a name that the notebook glues, or an if/else
chain that only does that (a string that is code, such as a child
process's source, is not words).
A line is *visible* when the built HTML shows it: its cell is not tagged
``remove-cell`` and its input is not tagged ``remove-input``, ``hide-input``
or ``hide-cell`` (collapsed inputs are one click away, not on the page).
Blank lines and lines that hold only a comment are not counted.

A notebook reader (JupyterLab) sees another view, `notebook_measure`: every
code cell whose input is not collapsed (``metadata.jupyter.source_hidden``,
which ``tools/execute.py`` sets from the tags above), and every non-blank
line of it, comments included. There a bookkeeping line is also a marker
for the tools (``# NBVAL_CHECK_OUTPUT``, ``# save: ...``) or a line of the
import guard (the first cell's ``try: import src``), at most
`NOTEBOOK_LIMIT` of the lines.

Run it as a script for a report: ``python tests/bookkeeping.py``
(``--notebook``: the notebook reader's view).
"""
import ast
import json
import re
import sys
from pathlib import Path, PurePosixPath

import yaml

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
LIMIT = 0.05
#: The most of a notebook reader's visible code lines that may be bookkeeping.
NOTEBOOK_LIMIT = 0.10
#: Comment lines that mark a cell for the tools, not for the reader.
MARKERS = ("# NBVAL_CHECK_OUTPUT", "# save:")


def lesson_pages(toc=ROOT / "_toc.yml"):
    """The notebooks of the numbered parts of ``_toc.yml``, chapters and
    their sections, in order (as paths relative to the root, no suffix)."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    pages = []

    def walk(entries):
        for entry in entries or ():
            if "file" in entry:
                page = str(PurePosixPath(entry["file"]).with_suffix(""))
                if (ROOT / f"{page}.ipynb").exists():
                    pages.append(page)
            walk(entry.get("sections"))
    for part in data.get("parts") or []:
        if part.get("numbered"):
            walk(part.get("chapters"))
    return pages


def text(value):
    return "".join(value) if isinstance(value, list) else value


def visible(cell):
    """Whether the built HTML shows this code cell's input."""
    tags = set(cell.get("metadata", {}).get("tags", []))
    return cell["cell_type"] == "code" and not tags & HIDDEN


def _python(source):
    """The cell's source with IPython's magics and shell lines blanked, so
    that it parses and its line numbers stay the source's."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def _is_words(node):
    """Whether an expression builds a string: a literal, an f-string, a
    choice between strings, a concatenation, ``.format`` or ``.join``."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.IfExp):
        return _is_words(node.body) or _is_words(node.orelse)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_words(node.left) or _is_words(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return (node.func.attr in ("format", "join")
                and _is_words(node.func.value))
    return False


def _machinery_call(sub):
    """Whether a call node calls ``glue``, the reference or ``Lesson``."""
    f = sub.func
    if isinstance(f, ast.Name) and f.id in ("glue", "Lesson"):
        return True
    if isinstance(f, ast.Attribute):
        if f.attr == "glue":
            return True
        root = f
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and root.id == "ref"
    return False


def _calls_machinery(node):
    """Whether a statement calls ``glue``, the reference or ``Lesson``."""
    return any(isinstance(sub, ast.Call) and _machinery_call(sub)
               for sub in ast.walk(node))


def glued_names(sources):
    """The names that the glue and reference calls of ``sources`` read."""
    names = set()
    for source in sources:
        try:
            tree = ast.parse(_python(source))
        except SyntaxError:
            continue
        for sub in ast.walk(tree):
            if isinstance(sub, ast.Call) and _machinery_call(sub):
                for arg in [*sub.args, *(k.value for k in sub.keywords)]:
                    names |= {n.id for n in ast.walk(arg)
                              if isinstance(n, ast.Name)}
    return names


def _targets(node):
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {n.id for t in targets for n in ast.walk(t)
            if isinstance(n, ast.Name)}


def _assigns_words(node, glued):
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        return (node.value is not None and _is_words(node.value)
                and bool(_targets(node) & glued))
    return False


def _bookkeeping(stmt, glued):
    """Whether a simple or compound statement is bookkeeping as a whole."""
    if isinstance(stmt, ast.If):
        body = stmt.body + stmt.orelse
        return bool(body) and all(_bookkeeping(s, glued) for s in body)
    if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign | ast.AugAssign):
        return _calls_machinery(stmt) or _assigns_words(stmt, glued)
    return False


def _marked(stmts, lines, glued):
    """The line numbers of the bookkeeping statements among ``stmts``,
    looking inside loops, functions and mixed if/else chains."""
    for stmt in stmts:
        if _bookkeeping(stmt, glued):
            lines.update(range(stmt.lineno, stmt.end_lineno + 1))
            continue
        if isinstance(stmt, ast.ClassDef):      # attributes, not words
            continue
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                _marked(inner, lines, glued)
    return lines


def count_source(source, glued=frozenset()):
    """(code lines, bookkeeping lines) of one cell's source, given the
    names its notebook glues."""
    src = _python(source)
    code = {i for i, line in enumerate(src.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#")}
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return len(code), 0
    return len(code), len(_marked(tree.body, set(), glued) & code)


def measure(nb):
    """(visible code lines, bookkeeping lines among them) of a notebook."""
    glued = glued_names(text(c["source"]) for c in nb["cells"]
                        if c["cell_type"] == "code")
    total = kept = 0
    for cell in nb["cells"]:
        if visible(cell):
            n, k = count_source(text(cell["source"]), glued)
            total, kept = total + n, kept + k
    return total, kept


def share(nb):
    total, kept = measure(nb)
    return kept / total if total else 0.0


def bookkeeping_lines(nb):
    """The visible bookkeeping lines of a notebook, as (cell id, line)."""
    glued = glued_names(text(c["source"]) for c in nb["cells"]
                        if c["cell_type"] == "code")
    found = []
    for cell in nb["cells"]:
        if not visible(cell):
            continue
        src = _python(text(cell["source"]))
        try:
            marked = _marked(ast.parse(src).body, set(), glued)
        except SyntaxError:
            continue
        lines = src.splitlines()
        found += [(cell.get("id"), lines[i - 1]) for i in sorted(marked)
                  if lines[i - 1].strip()
                  and not lines[i - 1].strip().startswith("#")]
    return found


def collapsed(cell):
    """Whether JupyterLab shows this cell's input collapsed."""
    return bool(cell.get("metadata", {}).get("jupyter", {})
                .get("source_hidden"))


def _is_guard(source):
    return "import src" in source and "ModuleNotFoundError" in source


def notebook_lines(nb):
    """``(cell id, line, bookkeeping)`` for every non-blank line of the
    code a notebook reader sees: the inputs JupyterLab does not collapse."""
    glued = glued_names(text(c["source"]) for c in nb["cells"]
                        if c["cell_type"] == "code")
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or collapsed(cell):
            continue
        source = text(cell["source"])
        src = _python(source)
        try:
            marked = _marked(ast.parse(src).body, set(), glued)
        except SyntaxError:
            marked = set()
        guard = _is_guard(source)
        for i, line in enumerate(source.splitlines(), 1):
            if line.strip():
                kept = (guard or i in marked
                        or line.strip().startswith(MARKERS))
                found.append((cell.get("id"), line, kept))
    return found


def notebook_measure(nb):
    """(visible code lines, bookkeeping lines among them) of a notebook as
    a reader sees it in JupyterLab (`notebook_lines`)."""
    lines = notebook_lines(nb)
    return len(lines), sum(kept for _, _, kept in lines)


if __name__ == "__main__":
    view = notebook_measure if "--notebook" in sys.argv else measure
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    every = [0, 0]
    for page in args or lesson_pages():
        nb = json.loads((ROOT / f"{page}.ipynb").read_text())
        total, kept = view(nb)
        every = [every[0] + total, every[1] + kept]
        print(f"{page}: {kept}/{total} = {kept / max(total, 1):.1%}")
        if "-v" in sys.argv or args:
            if view is notebook_measure:
                for cid, line, kept in notebook_lines(nb):
                    if kept:
                        print(f"  {cid}: {line}")
            else:
                for cid, line in bookkeeping_lines(nb):
                    print(f"  {cid}: {line}")
    print(f"all: {every[1]}/{every[0]} = {every[1] / max(every[0], 1):.1%}")
