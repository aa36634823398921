"""What a reader meets on a lesson's page, checked on the lessons' stored
outputs and sources (the built HTML: tests/test_browser.py).

Each test names a bug a reader once met: a stray dict under the imports,
tracebacks through the CPU device model's internals and this machine's
paths, glued words with literal backticks, a caption promising a line the
figure does not draw, two curves drawn on top of each other, plain-text
references to the book's own pages, sources named but not linked, and a
downloaded lesson that fails on ``import src`` without saying why.
"""
import ast
import json
import re
import subproc
import sys
from pathlib import Path

import pytest
import yaml

from src.reference.prose import as_book

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
LESSONS = sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.ipynb"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def read(lesson):
    """Lesson ``lesson`` as the book reads it (raw markdown cells as
    markdown)."""
    return as_book(json.loads((BOOK / f"{lesson}.ipynb").read_text()))


def text(value):
    return "".join(value) if isinstance(value, list) else value


def code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def shown(out):
    """What an output shows a reader (glued values show nothing)."""
    if "scrapbook" in out.get("metadata", {}):
        return ""
    if out["output_type"] == "stream":
        return text(out["text"])
    if out["output_type"] == "error":
        return ANSI.sub("", "\n".join(out["traceback"]))
    return text(out.get("data", {}).get("text/plain", ""))


@pytest.fixture(params=LESSONS)
def lesson(request):
    return request.param


def test_the_set_up_cells_show_only_the_banner(lesson):
    """The first code cell, hidden, checks that ``src`` can be imported
    and shows nothing; the next two (the banner, the imports) show the
    banner and nothing else: no value of a last expression, such as the
    dict ``{'profile_gpu': H100, ...}`` that `Lesson.glue_profile`
    returns."""
    guard, first, second = code_cells(read(lesson))[:3]
    assert "remove-cell" in guard["metadata"].get("tags", [])
    assert not guard["outputs"]
    assert text(first["source"]).startswith("from src import cp, cpx")
    assert "Backend:" in "".join(shown(o) for o in first["outputs"])
    for cell in (first, second):
        results = [o for o in cell["outputs"]
                   if o["output_type"] == "execute_result"]
        assert not results, (lesson, cell["id"], shown(results[0]))
    assert "profile_gpu" not in "".join(shown(o) for o in second["outputs"])


def test_a_shown_error_is_the_readers_lines_and_cupys_message(lesson):
    """A lesson shows an error as a GPU run would show CuPy's: the
    reader's own lines, then the exception and its message; no frame
    inside ``src`` (the CPU device model's, the book's helpers'), no path
    of the machine that ran the lesson, and the kernel's traceback mode
    left as it was (the lines of the cell are there)."""
    for cell in code_cells(read(lesson)):
        for out in cell["outputs"]:
            if out["output_type"] != "error":
                continue
            shown_text = shown(out)
            where = (lesson, cell["id"], shown_text)
            assert "cpudevice" not in shown_text, where
            assert not re.search(r"(^|[\s\"'(])/(work|home|tmp|usr|opt)/",
                                 shown_text, re.M), where
            assert "site-packages" not in shown_text, where
            frames = re.findall(r"^(Cell In\[\d+\]|File [^\n]*)",
                                shown_text, re.M)
            assert frames and all(f.startswith("Cell In[")
                                  for f in frames), where
            last = shown_text.strip().splitlines()[-1]
            assert last.startswith(f"{out['ename']}: "), where


def test_a_lesson_opened_without_the_book_says_what_to_fetch(lesson,
                                                            tmp_path):
    """The first code cell, run where ``src`` cannot be imported (a
    downloaded notebook on its own), stops with a message that names the
    folder it ran in, the ``sys.path`` fix and where to get the book."""
    source = text(code_cells(read(lesson))[0]["source"])
    run = subproc.run(["-c", source], cwd=tmp_path, timeout=60, alone=True)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: This lesson needs `src`")
    assert "README" in last and "book/" in last and str(tmp_path) in last
    assert "sys.path.insert(0, 'path/to/book')" in last


def test_a_lesson_opened_beside_the_book_names_the_path_to_add(lesson):
    """Run from the project's root (``book/``'s parent), where ``src`` is
    not on the path, the guard names the folder to put on it, and does not
    send the reader to get a source they have."""
    source = text(code_cells(read(lesson))[0]["source"])
    run = subproc.run(["-c", source], cwd=ROOT, timeout=60, alone=True)
    last = run.stderr.strip().splitlines()[-1]
    assert f"sys.path.insert(0, {str(BOOK)!r})" in last, last
    assert "README" not in last and str(ROOT) in last


def test_the_guard_shows_one_line_and_leaves_the_kernels_traceback_mode(
        tmp_path):
    """In IPython the guard's error is one line (its own
    ``_render_traceback_``), and the kernel's traceback mode is the one it
    had: a reader's own error later shows its cell and line."""
    source = text(code_cells(read(LESSONS[0]))[0]["source"])
    code = ("from IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance(colors='nocolor')\n"
            f"shell.run_cell({source!r})\n"
            "print('-- mode:', shell.InteractiveTB.mode)\n"
            "shell.run_cell('x = 1\\nundefined_name')\n")
    run = subproc.run(["-c", code], cwd=tmp_path, timeout=60, alone=True)
    guard, _, rest = ANSI.sub("", run.stdout).partition("-- mode: ")
    assert guard.strip().splitlines() == [guard.strip()]
    assert guard.startswith("ModuleNotFoundError: This lesson needs `src`")
    assert rest.startswith("Context")
    assert "line 2" in rest and "NameError" in rest


def glued_texts(nb):
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is None:
                continue
            for mime, value in out.get("data", {}).items():
                if mime.endswith("text/plain"):
                    yield name, text(value)


def markdown(nb):
    return "\n\n".join(text(c["source"]) for c in nb["cells"]
                       if c["cell_type"] == "markdown")


def test_glued_words_that_quote_code_paste_as_markdown(lesson):
    """``{glue:text}`` shows backticks as they are ("`set` held the
    host"): a glued text that quotes code is pasted with ``{glue:md}``,
    which sets it as code."""
    nb = read(lesson)
    prose = markdown(nb)
    for name, value in glued_texts(nb):
        if "`" not in value:
            continue
        plain = re.findall(r"\{glue(?::text)?\}`" + re.escape(name)
                           + r"(?::[^`]*)?`", prose)
        assert not plain, f"{lesson}: {name} ({value[:40]!r}) pasted as text"


def figure_cells(nb):
    for cell in code_cells(nb):
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if figure and figure.get("caption"):
            yield cell, figure


def test_a_caption_promises_only_lines_its_cell_always_draws(lesson):
    """A caption that names a dotted line belongs to a cell that draws one
    on every backend, not only under an ``if`` (Fig 6.2 promised the
    link's nominal bandwidth, which the CPU device model has no data
    for)."""
    for cell, figure in figure_cells(read(lesson)):
        if "dotted" not in figure["caption"]:
            continue
        drawn = [ln for ln in text(cell["source"]).splitlines()
                 if re.search(r"""(ls|linestyle)\s*=\s*["']:""", ln)]
        assert drawn and all(not ln.startswith(" ") for ln in drawn), (
            lesson, figure.get("name"), figure["caption"])


def test_host_to_device_and_back_are_drawn_apart_in_fig_6_2():
    """H2D and D2H copies run at about the same rate (55 and 54 GB/s on
    the H100): their curves take different markers and widths, so that
    both show where they coincide."""
    [cell] = [c for c, f in figure_cells(read("06_1_bandwidth"))
              if f.get("name") == "fig-pinned-bandwidth"]
    tree = ast.parse(text(cell["source"]))
    [looks] = [node.value for node in tree.body
               if isinstance(node, ast.Assign)
               and getattr(node.targets[0], "id", None) == "looks"]
    looks = {k.value: {kw.arg: ast.literal_eval(kw.value)
                       for kw in v.keywords}
             for k, v in zip(looks.keys, looks.values)}
    assert set(looks) == {"H2D", "D2H"}
    assert looks["H2D"]["marker"] != looks["D2H"]["marker"]
    assert looks["H2D"]["lw"] != looks["D2H"]["lw"]


#: A page of the book named in prose as a file: `backends.md`.
_FILE_NAME = re.compile(r"(?<![(/\w])`?(?:book/)?\w+\.(?:md|ipynb)\b`?(?!\))")


def test_references_to_the_books_pages_are_links(lesson):
    """The book's own pages are named by links (``[the backends
    page](backends.md)``), never as a file name in plain text."""
    for cell in read(lesson)["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        found = _FILE_NAME.findall(text(cell["source"]))
        assert not found, (lesson, cell["id"], found)


#: The sources the lessons follow: how prose names each, and its site.
SOURCES = {
    "NVIDIA's overlap post": (r"How to Overlap Data Transfers",
                              r"developer\.nvidia\.com/blog/"),
    "PyTorch's non_blocking and pin_memory guide": (
        r"A well-known PyTorch experiment", r"pytorch\.org/tutorials/"),
    "d2l's asynchronous computation section": (
        r"Asynchronous\s+Computation", r"d2l\.ai/chapter_computational"),
    "MindSpore's docs": (r"MindSpore", r"mindspore\.cn/docs/"),
    "MXNet's docs": (r"MXNet", r"mxnet\.apache\.org|d2l\.ai/"),
}


@pytest.mark.parametrize("source", SOURCES)
def test_each_source_is_linked_where_a_lesson_first_names_it(source):
    """In each lesson, the first markdown cell that names a source links
    it."""
    name, site = SOURCES[source]
    named = 0
    for lesson in LESSONS:
        cells = [text(c["source"]) for c in read(lesson)["cells"]
                 if c["cell_type"] == "markdown"]
        first = next((c for c in cells if re.search(name, c)), None)
        if first is None:
            continue
        named += 1
        assert re.search(site, first), (
            f"{lesson}: {source} is named without a link: "
            f"{first[:120]!r}")
    assert named, f"no lesson names {source}"


# -- the note on every page: how to get the source and run it ---------------
def runnote():
    sys.path.insert(0, str(BOOK / "_ext"))
    try:
        import runnote as module
    finally:
        sys.path.remove(str(BOOK / "_ext"))
    return module


def test_the_repository_is_one_setting_left_empty_until_one_exists():
    """``repository: url:`` in _config.yml names the repository; it is
    there even while empty, since Jupyter Book's default would otherwise
    name Jupyter Book's own repository."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "url" in config["repository"]
    assert "runnote" in config["sphinx"]["local_extensions"]


def test_the_note_gives_the_readmes_two_commands_and_a_link_if_any():
    module = runnote()
    build, test = module.readme_commands()
    assert build.endswith("jupyter-book build . -W --keep-going")
    assert test.endswith("python -m pytest")
    readme = (ROOT / "README.md").read_text()
    assert build in " ".join(readme.split())
    none = module.note_html("", (build, test))
    assert "<a " not in none and "no public repository" in none
    assert "jupyter-book build" in none and "python -m pytest" in none
    url = "https://example.org/book"
    linked = module.note_html(url, (build, test))
    assert f'href="{url}"' in linked and "no public repository" not in linked


def table_doctree(rows):
    """A docutils table of ``rows`` (the first the header), as a MyST
    table parses."""
    from docutils.core import publish_doctree
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    rule = "+" + "+".join("-" * (w + 2) for w in width) + "+"
    head = rule.replace("-", "=")
    lines = [rule]
    for n, row in enumerate(rows):
        lines.append("| " + " | ".join(
            c.ljust(w) for c, w in zip(row, width)) + " |")
        lines.append(head if n == 0 else rule)
    return publish_doctree("\n".join(lines) + "\n")


def page_table(doctree):
    from docutils import nodes
    return [[e.astext() for e in row.children]
            for row in doctree.findall(nodes.row)]


def test_a_reference_column_of_dashes_only_is_dropped_from_the_page():
    sys.path.insert(0, str(BOOK / "_ext"))
    import refcolumns
    from src.reference import MISSING
    assert refcolumns.MISSING == MISSING
    none = table_doctree([["step", "this run", "H100"],
                          ["eager", "12", MISSING], ["fused", "3", MISSING]])
    refcolumns.drop_dash_columns(None, none)
    assert page_table(none) == [["step", "this run"], ["eager", "12"],
                                ["fused", "3"]]
    some = [["step", "this run", "H100"], ["eager", "12", MISSING],
            ["fused", "3", "2.5"]]
    kept = table_doctree(some)
    refcolumns.drop_dash_columns(None, kept)
    assert page_table(kept) == some         # one value measured: kept
