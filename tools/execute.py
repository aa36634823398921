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
"""
import argparse
import os
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
    nb = nbformat.read(str(path), as_version=4)
    before = checked_texts(nb)
    writer.execute_notebook(nb, timeout=timeout)
    errors = writer.unexpected_errors(nb)
    if not errors:
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


def lessons(args):
    """The notebooks ``args.lessons`` name (default: every lesson)."""
    return [lesson_path(p) for p in args.lessons] or [
        *sorted(BOOK.glob("0*.ipynb")), BOOK / "misuse.ipynb"]


def main(argv=None):
    args = lessons_parser(__doc__).parse_args(argv)
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
