"""Restart and run lessons in place, so that their stored outputs are a
fresh run's.

    python tools/execute.py [LESSON ...] [--timeout S]

LESSON: a notebook's path, or a lesson's name (``05_1_queues``, ``05_1``);
default: every lesson, ``book/0*.ipynb``, and the misuse catalogue.

A lesson's stored outputs are what nbval compares (the cells marked
``# NBVAL_CHECK_OUTPUT``) and what a reader sees in the notebook before
running it; the book build executes the lessons again and does not write
back. So execute a lesson here after changing it, or after changing code
in ``book/src`` that it shows, then run its tests
(``python -m pytest book/05_1_queues.ipynb``) and read the diff.

Each lesson runs top to bottom in a fresh kernel started in ``book/``, as
nbval's does, on the CPU device model unless ``BOOK_BACKEND`` says
otherwise: the stored outputs are the model's, the run every reader without
a GPU and every CI run compares with (a GPU's run is stored as a reference
instead: ``tools/gpu/refresh-reference.sh``). A lesson that raises an
error outside a cell tagged ``raises-exception`` is not written, and the
exit status is 1. A checked cell whose output changed is named: nbval will
take the new output as the truth from now on, so check that it should.

A lesson is stored as JupyterLab should show it (`jupyterlab_layout`): a
code cell the book hides (tags ``remove-cell``, ``remove-input``,
``hide-input``, ...) has its input collapsed, and its outputs where the
book removes them (``metadata.jupyter.source_hidden``, ``outputs_hidden``);
each exercise's solution (a ``:::{dropdown}``) is a cell of its own,
collapsed; and each run of markdown cells that paste glued values is
shown, numbers filled in, by a cell below it (`prose_layout`). Text that
JupyterLab keeps collapsed is stored in raw cells of format
``text/markdown``, which the book reads as markdown: JupyterLab's Run All
expands a collapsed markdown cell, never a raw one. The book renders the
same page. ``--layout-only`` does that without running the lessons: run
it after a merge, or after editing a lesson's prose.
"""
import argparse
import hashlib
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"


def lesson_path(name):
    """The notebook a LESSON argument names: a path to it, or a lesson's
    name or number in ``book/`` (``05_1_queues``, ``05_1``)."""
    path = Path(name)
    if path.suffix == ".ipynb":
        if not path.is_file():
            raise SystemExit(f"no such notebook: {name}")
        return path.resolve()
    found = sorted(BOOK.glob(f"{path.name}*.ipynb"))
    if len(found) != 1:
        lessons = ", ".join(p.stem for p in sorted(BOOK.glob("0*.ipynb")))
        raise SystemExit(f"{name!r} names {len(found)} lessons; the "
                         f"lessons: {lessons}")
    return found[0]


#: Tags whose cells' inputs the book hides: JupyterLab collapses them.
SOURCE_HIDDEN = {"remove-cell", "remove-input", "hide-input", "hide-cell"}
#: Tags whose cells' outputs the book hides (JupyterLab shows them again
#: once the cell runs).
OUTPUTS_HIDDEN = {"remove-cell", "remove-output", "hide-output", "hide-cell"}
#: The fence that opens a solution, at the start of a line.
SOLUTION = re.compile(r"^(:::+)\s*\{dropdown\}")
#: The tag of a cell that shows the glued prose above it in JupyterLab
#: (`prose_layout`; with ``remove-cell``, its outputs stay shown).
PROSE_TAG = "jupyterlab-prose"
#: The ``metadata.format`` of a raw cell the book reads as markdown.
MARKDOWN = "text/markdown"
#: The first line of the raw cells of glued prose: a MyST comment (the
#: book drops it) that JupyterLab shows on the collapsed bar.
PROSE_MARK = ("% The book's source of the text below: its numbers are "
              "glued in")
HEADINGS = re.compile(r"\A((?:#{1,6} [^\n]*\n)+)\n+(?=\S)")


def collapse_hidden(nb):
    """Set each code cell's ``metadata.jupyter`` from its tags: the input
    collapsed where the book hides it (`SOURCE_HIDDEN`), the outputs where
    it removes them (`OUTPUTS_HIDDEN`); other cells' flags are cleared."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        flags = dict(cell.metadata.get("jupyter", {}))
        for key, names in (("source_hidden", SOURCE_HIDDEN),
                           ("outputs_hidden", OUTPUTS_HIDDEN)):
            if tags & names and not (key == "outputs_hidden"
                                     and PROSE_TAG in tags):
                flags[key] = True
            else:
                flags.pop(key, None)
        if flags:
            cell.metadata["jupyter"] = flags
        else:
            cell.metadata.pop("jupyter", None)


def _trim(lines):
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def solution_parts(source):
    """``[(is_solution, text)]``: a markdown cell's source cut before and
    after each ``:::{dropdown}`` block, each block with the MyST comment
    line (``% Solution to exercise N``) that names it in a collapsed
    cell; blank parts dropped."""
    lines, parts, text, number = source.split("\n"), [], [], None
    i = 0
    while i < len(lines):
        opened = SOLUTION.match(lines[i])
        if not opened:
            item = re.match(r"^(\d+)\.\s", lines[i])
            number = item.group(1) if item else number
            text.append(lines[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines))
                    if re.fullmatch(r":{%d,}\s*" % len(opened.group(1)),
                                    lines[j])), len(lines) - 1)
        head = []
        kept = _trim(text)
        while kept and kept[-1].startswith("%"):    # its name, stored
            head.insert(0, kept.pop())
            kept = _trim(kept)
        if not head:
            head = ["% Solution" + (f" to exercise {number}" if number
                                    else "")]
        parts += [(False, "\n".join(kept)),
                  (True, "\n".join(head + lines[i:end + 1]))]
        text, i = [], end + 1
    parts.append((False, "\n".join(_trim(text))))
    return [(solution, t) for solution, t in parts if t.strip()]


def collapse_solutions(nb):
    """Give each solution a markdown cell of its own, collapsed in
    JupyterLab (the book renders the same page: markdown cells are parsed
    one after another)."""
    cells, ids = [], {c.get("id") for c in nb.cells}
    for cell in nb.cells:
        if cell.cell_type != "markdown" or not any(
                SOLUTION.match(line) for line in cell.source.split("\n")):
            cells.append(cell)
            continue
        for k, (solution, text) in enumerate(solution_parts(cell.source)):
            part = cell if k == 0 else _new_markdown(nb, cell, k, ids)
            part.source = text
            _collapse(part, solution)
            cells.append(part)
    nb.cells = cells


def _collapse(cell, hidden):
    """Make ``cell`` a raw cell the book reads as markdown, collapsed in
    JupyterLab (``hidden``), or a plain markdown cell."""
    flags = dict(cell.metadata.get("jupyter", {}))
    if hidden:
        cell.cell_type = "raw"
        cell.metadata["format"] = MARKDOWN
        flags["source_hidden"] = True
    else:
        cell.cell_type = "markdown"
        cell.metadata.pop("format", None)
        flags.pop("source_hidden", None)
    if flags:
        cell.metadata["jupyter"] = flags
    else:
        cell.metadata.pop("jupyter", None)


def _book_markdown(cell):
    return cell.cell_type == "markdown" or (
        cell.cell_type == "raw" and cell.metadata.get("format") == MARKDOWN)


def _solution(cell):
    return _book_markdown(cell) and cell.source.startswith("% Solution")


def _glues(cell):
    return (_book_markdown(cell) and "{glue" in cell.source
            and not _solution(cell))


def _prose():
    if str(BOOK) not in sys.path:
        sys.path.insert(0, str(BOOK))
    os.environ.setdefault("BOOK_BACKEND", "cpu")
    from src.reference import prose
    return prose


def prose_layout(nb, lesson):
    """Show each run of ``nb``'s markdown cells that paste glued values,
    numbers filled in, in JupyterLab: its leading headings get a markdown
    cell of their own; the run becomes one raw markdown cell (the book
    reads markdown cells one after another: the page is the same), first
    line `PROSE_MARK`, collapsed; below it a code cell tagged
    ``remove-cell`` and `PROSE_TAG`, collapsed, shows it
    (``src.reference.prose.show``), its stored output made from the
    values glued in ``nb``'s stored outputs. Idempotent."""
    import nbformat
    # A shown cell already laid out below an unchanged run keeps its
    # output and count (those of the run that executed it).
    kept, was = {}, {}
    for i, c in enumerate(nb.cells):
        if PROSE_TAG in c.metadata.get("tags", []) and i and \
                nb.cells[i - 1].get("id"):
            kept[nb.cells[i - 1].id] = c
            was[nb.cells[i - 1].id] = nb.cells[i - 1].source
    cells = [c for c in nb.cells
             if PROSE_TAG not in c.metadata.get("tags", [])]
    ids = {c.get("id") for c in cells} | {c.get("id") for c in
                                          kept.values()}
    laid, run = [], []
    glued = None

    def close():
        nonlocal glued
        if not run:
            return
        prose = _prose()
        glued = prose.glued_in(nb) if glued is None else glued
        text = "\n\n".join(c.source for c in run)
        cell = run[0]
        cell.source = PROSE_MARK + "\n" + text
        _collapse(cell, True)
        if cell.id in kept and was[cell.id] == cell.source:
            laid.extend([cell, kept[cell.id]])
            run.clear()
            return
        shown = nbformat.v4.new_code_cell(
            "# The book's text above, with this run's numbers\n"
            "from src.reference.prose import show\n\n"
            f'show("{lesson}", "{cell.id}")',
            metadata={"tags": ["remove-cell", PROSE_TAG]})
        shown["id"] = _new_id(f"{cell.id}:prose", ids)
        # a count, as if it ran after the cell above it: nbval refuses a
        # stored output of a cell that never ran
        shown.execution_count = next((c.execution_count for c in
                                      reversed(laid) if c.cell_type ==
                                      "code"), None) or 1
        shown.outputs = [nbformat.v4.new_output(
            "display_data", data={"text/markdown": prose.paste(text,
                                                               glued)})]
        laid.extend([cell, shown])
        run.clear()

    for cell in cells:
        if _book_markdown(cell) and cell.source.startswith(PROSE_MARK):
            cell.source = cell.source[len(PROSE_MARK):].lstrip("\n")
            _collapse(cell, False)
        heads = HEADINGS.match(cell.source) if _glues(cell) else None
        if heads:
            close()
            head = nbformat.v4.new_markdown_cell(heads.group(1).rstrip())
            head["id"] = _new_id(f"{cell.id}:head", ids)
            laid.append(head)
            cell.source = cell.source[heads.end():]
        if _glues(cell):
            run.append(cell)
            continue
        close()
        laid.append(cell)
    close()
    nb.cells = laid


def _new_id(seed, ids):
    n = 0
    while (cid := hashlib.sha1(f"{seed}:{n}".encode()).hexdigest()[:8]) \
            in ids:
        n += 1
    ids.add(cid)
    return cid


def _new_markdown(nb, cell, k, ids):
    """A markdown cell for part ``k`` of ``cell``, with an id (when the
    notebook's cells have ids) made from the cell's, unique in ``ids``."""
    import nbformat
    new = nbformat.v4.new_markdown_cell("")
    new.pop("id", None)
    if "id" in cell:
        n = 0
        while (cid := hashlib.sha1(f"{cell.id}:{k}:{n}".encode())
               .hexdigest()[:8]) in ids:
            n += 1
        new["id"] = cid
        ids.add(cid)
    return new


def jupyterlab_layout(nb, lesson=None):
    """Store ``nb`` (lesson ``lesson``) as JupyterLab should show it
    (`collapse_solutions`, `prose_layout`, `collapse_hidden`)."""
    collapse_solutions(nb)
    prose_layout(nb, lesson)
    collapse_hidden(nb)


def checked_texts(nb):
    """``{cell index: what nbval compares}`` of the checked cells."""
    if str(ROOT / "tests") not in sys.path:
        sys.path.insert(0, str(ROOT / "tests"))
    from nbtexts import checked, texts
    return {i: texts(cell.outputs) for i, cell in enumerate(nb.cells)
            if checked(cell)}


def execute(path, timeout=600):
    """Run lesson ``path`` in a fresh kernel; write it back unless it
    raised an unexpected error. Return ``(errors, changed)``: the
    unexpected errors as ``[(cell index, error name)]``, and the indices
    of checked cells whose outputs changed."""
    import nbformat
    from src.reference import writer
    stored = Path(path).read_text()
    nb = nbformat.reads(stored, as_version=4)
    # Laid out first, and written, so that the cells that show the prose
    # (`prose_layout`; `show` reads its cells from the file) run in order
    # with the rest: every cell's output and count is this run's.
    jupyterlab_layout(nb, path.stem)
    before = checked_texts(nb)
    nbformat.write(nb, str(path))
    writer.execute_notebook(nb, timeout=timeout)
    errors = writer.unexpected_errors(nb)
    if errors:
        Path(path).write_text(stored)       # left as it was
    else:
        nbformat.write(nb, str(path))
    after = checked_texts(nb)
    return errors, sorted(i for i in after if after[i] != before.get(i))


def lessons_parser(doc):
    """A parser for a tool over lessons, described by its docstring
    ``doc``: the LESSON arguments and ``--timeout``."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson notebooks, or "
                        "lessons' names (default: book/0*.ipynb)")
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds a cell may take")
    return parser


def layout_only(paths):
    """`jupyterlab_layout` of each notebook, written back where it
    changes; outputs and code untouched. Returns the paths changed."""
    import nbformat
    changed = []
    for path in paths:
        nb = nbformat.read(str(path), as_version=4)
        before = nbformat.writes(nb)
        jupyterlab_layout(nb, path.stem)
        if nbformat.writes(nb) != before:
            nbformat.write(nb, str(path))
            changed.append(path)
    return changed


def lessons(args):
    """The notebooks ``args.lessons`` name (default: every lesson)."""
    return [lesson_path(p) for p in args.lessons] or [
        *sorted(BOOK.glob("0*.ipynb")), BOOK / "misuse.ipynb"]


def main(argv=None):
    parser = lessons_parser(__doc__)
    parser.add_argument("--layout-only", action="store_true",
                        help="collapse the hidden cells and solutions "
                        "(from the tags) without running the lessons")
    args = parser.parse_args(argv)
    if args.layout_only:
        for path in layout_only(lessons(args)):
            print(f"{path.name}: layout written")
        return 0
    os.environ.setdefault("BOOK_BACKEND", "cpu")
    sys.path.insert(0, str(BOOK))
    print(f"BOOK_BACKEND={os.environ['BOOK_BACKEND']}")
    failed = False
    for path in lessons(args):
        t = time.time()
        errors, changed = execute(path, args.timeout)
        failed = failed or bool(errors)
        state = (f"not written: errors (cell, name) {errors}" if errors
                 else "written")
        print(f"{path.name}: {state}, in {time.time() - t:.0f} s")
        if changed:
            print(f"  checked outputs changed in cells {changed}: nbval "
                  f"compares with them from now on")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
