"""The lessons write out the code that does the work; `src` keeps it.

d2l's convention: the experiment that teaches a runtime mechanism is
written, and run, in a lesson's cell; the tested helper in `book/src` is
that same code, saved for reuse. A cell whose first line is
``# save: src.<module>`` holds definitions (functions, classes) that must be
AST-equal to the definitions of the same names in that module: change one
and this test fails until the other follows.
"""
import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
MARK = re.compile(r"\A# save: (src(?:\.\w+)+)[ \t]*$", re.M)

# The experiments the book must show as code in a lesson, each saved in src:
# experiment -> (module, name of the definition).
REQUIRED = {
    "the overlap demo's V1 and V2 loops": ("src.pipeline", "run"),
    "the chunked energy pipeline": ("src.pipeline", "energy_stages"),
    "the 2x2 pinned x non_blocking loop": ("src.transfer", "two_by_two"),
    "the event-pair timing": ("src.timing", "EventTimer"),
    "the producer/consumer wait_event": ("src.pipeline",
                                         "produce_and_consume"),
    "the graph capture": ("src.loops", "graph_loop"),
}


def definitions(tree):
    """``{name: node}`` of the top-level functions and classes in ``tree``."""
    return {node.name: node for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                 ast.ClassDef))}


def module_path(module):
    return BOOK.joinpath(*module.split(".")).with_suffix(".py")


def saved_cells(nb):
    """``[(module, source)]`` for every ``# save:`` cell of notebook ``nb``."""
    out = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            m = MARK.match(cell.source)
            if m:
                out.append((m.group(1), cell.source))
    return out


def differences(module, cell_source, module_source=None):
    """What differs between the cell's definitions and the module's."""
    if module_source is None:
        path = module_path(module)
        if not path.exists():
            return [f"{module}: no such module ({path})"]
        module_source = path.read_text()
    saved = definitions(ast.parse(module_source))
    cell = definitions(ast.parse(cell_source))
    if not cell:
        return [f"the `# save: {module}` cell defines nothing"]
    problems = []
    for name, node in cell.items():
        if name not in saved:
            problems.append(f"{module} has no {name}")
        elif ast.dump(node) != ast.dump(saved[name]):
            problems.append(f"{name} in the lesson differs from {module}."
                            f"{name}: keep them the same code")
    return problems


CELLS = [(p.stem, module, src) for p in NOTEBOOKS
         for module, src in saved_cells(nbformat.read(p, as_version=4))]


@pytest.mark.parametrize("lesson, module, source", CELLS,
                         ids=[f"{c[0]}-{c[1]}" for c in CELLS])
def test_a_saved_cell_is_the_code_in_src(lesson, module, source):
    assert differences(module, source) == [], lesson


@pytest.mark.parametrize("experiment", sorted(REQUIRED))
def test_each_experiment_is_written_out_in_a_lesson(experiment):
    module, name = REQUIRED[experiment]
    found = [lesson for lesson, mod, src in CELLS
             if mod == module and name in definitions(ast.parse(src))]
    assert found, (f"{experiment}: no lesson writes out {module}.{name} in "
                   f"a `# save: {module}` cell")


def test_a_changed_line_is_a_difference():
    code = "def f(x):\n    return x + 1\n"
    assert differences("src.m", "# save: src.m\n" + code, code) == []
    changed = differences("src.m", "# save: src.m\n" + code.replace(
        "+ 1", "+ 2"), code)
    assert changed and "differs" in changed[0]
    assert "has no g" in differences("src.m", "def g():\n    pass\n", code)[0]


def test_the_mark_must_open_the_cell():
    assert MARK.match("# save: src.pipeline\ndef run(): pass")
    assert not MARK.match("x = 1\n# save: src.pipeline\n")
