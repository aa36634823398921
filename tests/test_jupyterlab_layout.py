"""A lesson opened in JupyterLab shows what the book shows: the cells the
book hides are collapsed, and so is each exercise's solution; each run of
prose that pastes glued values is the book's source, collapsed, and a cell
that shows it with the numbers filled in (``tools/execute.py``'s
`jupyterlab_layout`, applied whenever a lesson is stored); the book
renders the same page from the cells so laid out.
"""
import copy
import re
from pathlib import Path

import nbformat
import pytest

import scripts
from src.reference import prose
from src.reference.prose import as_book, is_markdown
from src.reference.store import GLUE_PREFIX

BOOK = Path(__file__).resolve().parents[1] / "book"
PAGES = sorted([*BOOK.glob("[0-9][0-9]_*.ipynb"), BOOK / "misuse.ipynb"])
execute = scripts.load("tools/execute.py")



@pytest.fixture(params=PAGES, ids=[p.stem for p in PAGES])
def page(request):
    return nbformat.read(str(request.param), as_version=4), request.param.stem


def flags(cell):
    return cell.metadata.get("jupyter", {})


def test_the_cells_the_book_hides_are_collapsed(page):
    nb, name = page
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = set(cell.metadata.get("tags", []))
        assert bool(flags(cell).get("source_hidden")) == bool(
            tags & execute.SOURCE_HIDDEN), (name, cell.id)
        assert bool(flags(cell).get("outputs_hidden")) == bool(
            tags & execute.OUTPUTS_HIDDEN
            and execute.PROSE_TAG not in tags), (name, cell.id)


def test_each_solution_is_a_collapsed_cell_of_its_own(page):
    nb, name = page
    for cell in nb.cells:
        if not is_markdown(cell) or cell.source.startswith(
                execute.PROSE_MARK):
            continue
        opened = [line for line in cell.source.splitlines()
                  if execute.SOLUTION.match(line)]
        if opened or flags(cell).get("source_hidden"):
            assert len(opened) == 1, (name, cell.id)
            lines = cell.source.splitlines()
            assert lines[0].startswith("% Solution"), (name, cell.id)
            assert execute.SOLUTION.match(lines[1]), (name, cell.id)
            assert re.fullmatch(r":::+\s*", lines[-1]), (name, cell.id)
            assert flags(cell).get("source_hidden") is True, (name, cell.id)
            assert cell.cell_type == "raw", (name, cell.id)


def test_the_layout_is_stored_and_idempotent(page):
    nb, name = page
    again = copy.deepcopy(nb)
    execute.jupyterlab_layout(again, name)
    assert nbformat.writes(again) == nbformat.writes(nb), (
        f"{name}: run python tools/execute.py --layout-only {name}")


EXERCISES = """## Exercises

1. Time it.

:::{dropdown} Solution
```python
print(1)
```
It is *fast*.
:::

2. Time it twice, see [the intro](#intro).

:::{dropdown} Solution
Twice as long.
:::
"""


def exercises_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title\n\n(intro)=\n## Intro"),
                nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_markdown_cell(EXERCISES),
                nbformat.v4.new_markdown_cell("Closing words.")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "P",
                                 "language": "python"}
    return nb


def test_solutions_are_cut_at_their_fences_and_named():
    nb = exercises_notebook()
    execute.jupyterlab_layout(nb)
    md = [(c.source.splitlines()[0], bool(flags(c).get("source_hidden")))
          for c in nb.cells if is_markdown(c)]
    assert md == [("# Title", False), ("## Exercises", False),
                  ("% Solution to exercise 1", True),
                  ("2. Time it twice, see [the intro](#intro).", False),
                  ("% Solution to exercise 2", True),
                  ("Closing words.", False)]
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids)


def doctree(nb, out):
    """The page myst-nb makes of ``nb`` (pseudo-XML, stored outputs), with
    the notebook's own line numbers, cell metadata and comments (which
    the HTML writer drops) taken out. Plain docutils lacks sphinx-design's
    dropdown: an admonition with a title stands in for it."""
    docutils_core = pytest.importorskip("docutils.core")
    parser = pytest.importorskip("myst_nb.docutils_").Parser
    nb = as_book(copy.deepcopy(nb))
    source = nbformat.writes(nb).replace("{dropdown}", "{admonition}")
    text = docutils_core.publish_string(
        source, parser=parser(), writer_name="pseudoxml",
        settings_overrides={
            "nb_execution_mode": "off", "report_level": 5,
            "nb_output_folder": str(out),
            "myst_enable_extensions": ["colon_fence", "dollarmath"],
            "output_encoding": "unicode"})
    text = re.sub(r' (line|cell_metadata|cell_index)="[^"]*"', "", text)
    return re.sub(r"\n *<comment[^>]*>\n( +[^<\n]*\n)*", "\n", text)


def test_the_book_renders_the_same_page_from_the_split_cells(tmp_path):
    before = exercises_notebook()
    after = copy.deepcopy(before)
    execute.jupyterlab_layout(after)
    assert len(after.cells) > len(before.cells)
    page = doctree(before, tmp_path)
    assert doctree(after, tmp_path) == page
    assert page.count("<admonition") == 2 and "Twice as long" in page
    assert '<enumerated_list enumtype="arabic" prefix="" start="2"' in page


def test_solutions_stay_collapsed_after_run_all():
    """JupyterLab's Run All expands each collapsed markdown cell it runs,
    never a raw one: a solution is a raw cell the book reads as
    markdown."""
    nb = exercises_notebook()
    execute.jupyterlab_layout(nb)
    solutions = [c for c in nb.cells if c.source.startswith("% Solution")]
    assert len(solutions) == 2
    for cell in solutions:
        assert cell.cell_type == "raw"
        assert cell.metadata["format"] == prose.MARKDOWN
        assert as_book(copy.deepcopy(nb)).cells[nb.cells.index(cell)] \
            .cell_type == "markdown"


def glue_output(name, value, markdown=None):
    data = {"text/plain": repr(value)}
    if markdown is not None:
        data["text/markdown"] = markdown
    return nbformat.v4.new_output(
        "display_data", data={GLUE_PREFIX + k: v
                              for k, v in data.items()},
        metadata={"scrapbook": {"name": name,
                                "mime_prefix": GLUE_PREFIX}})


def prose_notebook():
    nb = nbformat.v4.new_notebook()
    glued = nbformat.v4.new_code_cell("glue(...)", execution_count=1)
    glued.outputs = [glue_output("t_ms", 1.23456), glue_output("n", 3),
                     glue_output("note", "It *waits*.", "It *waits*.")]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title"),
        glued,
        nbformat.v4.new_markdown_cell(
            "## Timing\n\nIt took {glue:text}`t_ms:.2f` ms,"
            " {glue:text}`n` times."),
        nbformat.v4.new_markdown_cell("{glue:md}`note` Then more."),
        nbformat.v4.new_markdown_cell("Plain words, no numbers."),
        nbformat.v4.new_markdown_cell(
            "| | ms |\n|---|---|\n| t | {glue:text}`t_ms:.1f` |")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "P",
                                 "language": "python"}
    return nb


def test_glued_prose_is_shown_with_its_numbers():
    nb = prose_notebook()
    execute.jupyterlab_layout(nb, "99_demo")
    kinds = [(c.cell_type, c.source.splitlines()[0]) for c in nb.cells]
    assert kinds[2:4] == [("markdown", "## Timing"),
                          ("raw", execute.PROSE_MARK)]
    shown = [c for c in nb.cells
             if execute.PROSE_TAG in c.metadata.get("tags", [])]
    assert len(shown) == 2          # one per run of glued cells
    first, table = (c.outputs[0]["data"]["text/markdown"] for c in shown)
    assert first == ("It took 1.23 ms, 3 times.\n\nIt *waits*. Then "
                     "more.")
    assert table.endswith("| t | 1.2 |")
    source = nb.cells[nb.cells.index(shown[0]) - 1]
    assert f'show("99_demo", "{source.id}")' in shown[0].source
    assert "remove-cell" in shown[0].metadata["tags"]
    assert flags(shown[0]) == {"source_hidden": True}
    again = copy.deepcopy(nb)
    execute.jupyterlab_layout(again, "99_demo")
    assert nbformat.writes(again) == nbformat.writes(nb)


def test_the_book_renders_the_same_page_from_the_prose_cells(tmp_path):
    before = prose_notebook()
    after = copy.deepcopy(before)
    execute.jupyterlab_layout(after, "99_demo")
    page = doctree(before, tmp_path)
    assert doctree(after, tmp_path) == page
    assert "1.23" in page and "Plain words" in page


@pytest.mark.parametrize("value, spec", [
    (1.23456, ".3f"), (2, ".2g"), (1234.5, ",.0f"), (7, ""), ("x", "s"),
    ("It's", ""), (0.5, ".0%")])
def test_a_value_reads_as_the_book_pastes_it(value, spec):
    variables = pytest.importorskip("myst_nb.core.variables")
    assert prose.format_plain_text(repr(value), spec) == \
        variables.format_plain_text(repr(value), spec)


def test_a_value_glued_further_down_is_filled_in_when_it_is():
    glued = {"a": {"text/plain": "1"}}
    text = "{glue:text}`a` and {glue:text}`b:.1f`, **{glue:text}`c`**"
    assert prose.paste(text, glued) == (
        f"1 and {prose.LATER}, **{prose.LATER}**")
    assert prose.keys(text) == {"a", "b", "c"}
    glued["b"] = {"text/plain": "2.25"}
    glued["c"] = {"text/plain": "'x_y'"}
    assert prose.paste(text, glued) == "1 and 2.2, **x\\_y**"
