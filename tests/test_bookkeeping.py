"""The lesson in view, the plumbing out of sight: on each lesson page of
``_toc.yml`` (chapters and their sections), at most 5% of the code lines
the built HTML shows are bookkeeping, the book's own machinery (glue, the
reference, the words a sentence will say; see tests/bookkeeping.py).

A cell that only glues, chooses words or talks to the reference is tagged
``remove-cell`` (``remove-input`` when its output belongs on the page);
a plotting cell ``hide-input``; word choices live in ``src.words``.
"""
import json

import nbformat
import pytest

import bookkeeping as bk

# Pages another change is still splitting and clearing (issue 31): measured
# and reported, not yet held to the limit. Remove a name once it passes.
PENDING = set()


def too_much(nb, page):
    """Why a notebook's visible code holds too much bookkeeping, or None."""
    total, kept = bk.measure(nb)
    if total and kept / total > bk.LIMIT:
        lines = "\n".join(f"  {cid}: {line}"
                          for cid, line in bk.bookkeeping_lines(nb))
        return (f"{page}: {kept} of {total} visible code lines "
                f"({kept / total:.1%}) are bookkeeping, above "
                f"{bk.LIMIT:.0%}; tag the cells that only glue, choose "
                f"words or talk to the reference remove-cell (or "
                f"remove-input), or move the words into src.words:\n"
                f"{lines}")
    return None


@pytest.mark.parametrize("page", bk.lesson_pages())
def test_bookkeeping_is_at_most_5_percent_of_the_visible_code(page):
    nb = json.loads((bk.ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
    why = too_much(nb, page)
    if why and page in PENDING:
        pytest.skip(f"pending (issue 31): {why.splitlines()[0]}")
    assert why is None, why


def test_the_pending_pages_are_lesson_pages():
    assert PENDING <= set(bk.lesson_pages())


def cell(source, *tags):
    c = nbformat.v4.new_code_cell(source)
    if tags:
        c.metadata["tags"] = list(tags)
    return c


EXPERIMENT = "x = cp.ones(1000)\ny = x * 2\nprint(float(y.sum()))\n" * 7
GLUE = ('glue("total", float(y.sum()), display=False)\n'
        'word = "faster" if 1 < 2 else "slower"\n'
        'glue("word", word, display=False)\n'
        'ref.glue_ref("note_ref", "measured on the reference GPU")\n')


def seeded(*tags):
    return nbformat.v4.new_notebook(
        cells=[cell(EXPERIMENT, "nbval-check-output"), cell(GLUE, *tags)])


def test_a_seeded_notebook_with_its_glue_in_view_fails():
    why = too_much(seeded(), "book/99_seeded")
    assert why and "4 of 25" in why and "glue(\"word\"" in why


@pytest.mark.parametrize("tag", ["remove-cell", "remove-input",
                                 "hide-input"])
def test_the_same_notebook_passes_with_its_glue_out_of_sight(tag):
    assert too_much(seeded(tag), "book/99_seeded") is None


@pytest.mark.parametrize("source, counted", [
    ('glue("a", 1)\n', 1),
    ('ref.compare()\n', 1),
    ('ref = Lesson("01_1_runtime")\n', 1),
    ('if fast:\n    note = "faster"\nelse:\n    note = "slower"\n'
     'glue("note", note)\n', 5),
    ('note = f"{n:,} values"\nglue("note", note)\n', 2),
    ('child = f"import json\\nprint({n})"\nrun(child)\n', 0),  # code
    ('x = cp.zeros(4, dtype="float32")\nglue("x", x)\n', 1),
    ('%timeit x + 1\nprint("done")\n', 0),                      # a magic
    ('# a comment\n\nfor k, v in m.items():\n    glue(k, v)\n', 1),
    ('class Hook:\n    name = "Hook"\n', 0),                   # attribute
])
def test_what_counts_as_bookkeeping(source, counted):
    glued = bk.glued_names([source])
    assert bk.count_source(source, glued)[1] == counted


def test_sections_of_the_toc_are_lesson_pages(tmp_path):
    (tmp_path / "book").mkdir()
    for name in ("05_streams", "05a_queues", "05b_overlap", "intro"):
        (tmp_path / "book" / f"{name}.ipynb").write_text("{}")
    toc = tmp_path / "_toc.yml"
    toc.write_text(
        "format: jb-book\nroot: book/intro\nparts:\n"
        "  - caption: Start\n    chapters:\n      - file: book/intro\n"
        "  - caption: Runtime\n    numbered: true\n    chapters:\n"
        "      - file: book/05_streams\n        sections:\n"
        "          - file: book/05a_queues\n"
        "          - file: book/05b_overlap.ipynb\n")
    old = bk.ROOT
    try:
        bk.ROOT = tmp_path
        assert bk.lesson_pages(toc) == ["book/05_streams", "book/05a_queues",
                                        "book/05b_overlap"]
    finally:
        bk.ROOT = old


@pytest.mark.parametrize("page", bk.lesson_pages())
def test_a_notebook_reader_sees_at_most_10_percent_bookkeeping(page):
    """In JupyterLab the cells the book hides are collapsed (their lines
    count zero); of the lines left, markers included, at most 10% are the
    book's own machinery."""
    nb = json.loads((bk.ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
    total, kept = bk.notebook_measure(nb)
    lines = "\n".join(f"  {cid}: {line}"
                      for cid, line, k in bk.notebook_lines(nb) if k)
    assert kept <= bk.NOTEBOOK_LIMIT * total, (
        f"{page}: {kept} of {total} lines a notebook reader sees are "
        f"bookkeeping; collapse the cells that hold them (tag them, then "
        f"python tools/execute.py --layout-only):\n{lines}")


def test_the_notebook_view_counts_collapsed_cells_zero_and_markers():
    shown = cell("# NBVAL_CHECK_OUTPUT\nx = 1\n\nprint(x)\n")
    guard = cell('try:\n    import src\nexcept ModuleNotFoundError:\n'
                 '    raise\n')
    glue = cell('glue("x", x, display=False)\n', "remove-cell")
    nb = nbformat.v4.new_notebook(cells=[guard, shown, glue])
    assert bk.notebook_measure(nb) == (8, 6)      # nothing collapsed yet
    for c in (guard, glue):
        c.metadata["jupyter"] = {"source_hidden": True}
    assert bk.notebook_measure(nb) == (3, 1)      # the marker
