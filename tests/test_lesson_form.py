"""Every lesson has one form: banner, objectives, the lesson, a Summary,
Exercises with hidden solutions, captioned figures, glued numbers."""
import re
from pathlib import Path

import nbformat
import pytest

from src.reference.prose import as_book

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(params=NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def nb(request):
    """The lesson as the book reads it (raw markdown cells as markdown)."""
    return as_book(nbformat.read(request.param, as_version=4))


def markdown(nb):
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_lesson_opens_with_title_and_banner(nb):
    assert nb.cells[0].cell_type == "markdown"
    # "# Devices", not "# 1. Devices": the numbered part of _toc.yml adds
    # the chapter number, and a second one would read "1. 1. Devices".
    assert re.match(r"# [A-Z]", nb.cells[0].source), nb.cells[0].source
    guard, first = code_cells(nb)[:2]     # the guard is hidden
    assert "remove-cell" in guard.metadata.get("tags", [])
    assert "banner()" in first.source and "from src import" in first.source


def test_lesson_has_objectives_summary_and_exercises(nb):
    md = markdown(nb)
    heads = re.findall(r"^## (.+)$", md, re.M)
    assert heads[0] == "Overview"
    assert "Summary" in heads and heads[-1] == "Exercises"
    exercises = md.split("## Exercises")[1]
    assert exercises.count(":::{dropdown}") >= 2


def test_every_figure_is_captioned(nb):
    figures = [c for c in code_cells(nb)
               if any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert len(figures) >= 1
    for c in figures:
        caption = c.metadata.get("mystnb", {}).get("figure", {})
        assert caption.get("caption"), c.source[:80]


def test_measured_numbers_in_prose_are_glued(nb):
    keys = {o.metadata["scrapbook"]["name"] for c in code_cells(nb)
            for o in c.outputs if "scrapbook" in o.get("metadata", {})}
    used = set(re.findall(r"\{glue:\w+\}`([\w-]+)", markdown(nb)))
    assert used, "no glued number in the prose"
    assert used <= keys, used - keys


def test_code_lines_fit_in_80_columns(nb):
    for c in code_cells(nb):
        for line in c.source.splitlines():
            assert len(line) < 80, line
