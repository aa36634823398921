"""A lesson's sentences with this run's numbers, in JupyterLab.

The book's prose pastes measured values with myst-nb's glue roles
(``{glue:text}`queue_ms:.3f```, ``{glue:md}`queue_note```), which the
book build fills in and JupyterLab would show raw. So each run of cells
of such prose is kept twice (``tools/execute.py`` lays it out): as the
book's source, in raw cells of format `MARKDOWN`, which the book reads as
markdown (`as_book`, ``book/_ext/prosecells.py``) and JupyterLab keeps
collapsed (it expands a collapsed *markdown* cell when Run All runs it),
and below them a code cell, tagged ``remove-cell`` (the book drops it)
and `PROSE_TAG`, collapsed too, that runs ``show("04_1_queueing",
CELL_ID, ...)``: it reads those cells from the lesson's notebook and shows
them as Markdown, each role replaced by the value this kernel glued,
formatted as myst-nb formats it (`paste`). Its stored output is made from
the lesson's stored outputs, so a reader sees the stored run's numbers
before running anything, and this run's once the cell runs.

Module level imports nothing of `src`: the book's reader loads this file
on its own.
"""
import itertools
import json
import re
from pathlib import Path

#: The ``metadata.format`` of a raw cell that the book reads as markdown.
MARKDOWN = "text/markdown"

#: The tag of a cell that shows its markdown cells' prose (with the book's
#: ``remove-cell``): JupyterLab shows its output, the book drops it.
PROSE_TAG = "jupyterlab-prose"

#: A glue role: ``{glue}`key```, ``{glue:text}`key:fmt```, ``{glue:md}`key```.
ROLE = re.compile(r"\{glue(?::(\w+))?\}`([^`]+)`")
#: A MyST role that JupyterLab cannot follow: ``{doc}`backends```.
OTHER_ROLE = re.compile(r"\{(doc|ref|term|numref)\}`(?:([^`<]*?)\s*<)?"
                        r"([^`>]+)>?`")
#: A MyST comment line, which the book drops.
COMMENT = re.compile(r"^%.*(?:\n|$)", re.M)
#: What Markdown would read as markup in a pasted text.
_MARKUP = re.compile(r"([\\`*_\[\]<>|$])")

BOOK = Path(__file__).resolve().parents[2]


def is_markdown(cell):
    """Whether the book reads ``cell`` (a dict) as markdown: a markdown
    cell, or a raw cell of format `MARKDOWN`."""
    return cell["cell_type"] == "markdown" or (
        cell["cell_type"] == "raw"
        and cell.get("metadata", {}).get("format") == MARKDOWN)


def as_book(nb):
    """Notebook ``nb`` (a dict or notebook node; changed in place, and
    returned) as the book reads it: each raw cell of format `MARKDOWN` a
    markdown cell."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "raw" and is_markdown(cell):
            cell["cell_type"] = "markdown"
            cell["metadata"].pop("format", None)
    return nb


def format_plain_text(text, fmt_spec):
    """``text/plain`` as ``{glue:text}`` pastes it (myst-nb's
    ``format_plain_text``): literal-evaluated, so that a string loses its
    quotes, then formatted by ``fmt_spec`` (its last letter picks the
    type)."""
    from ast import literal_eval
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if fmt_spec == "":
        return str(value)
    kind = fmt_spec[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt_spec)


def _text(value):
    return "".join(value) if isinstance(value, list) else value


#: ``{(lesson, cell ids): (display id, markdown, keys)}``: the texts
#: `show` showed last, each with the keys it quotes.
pending = {}
_shown = itertools.count(1)

#: What a sentence shows for a value that a cell further down glues: the
#: sentence is shown again, filled in, when that cell runs.
LATER = "*(measured below)*"


def keys(markdown):
    """The keys whose values ``markdown``'s glue roles paste."""
    return {_key(m.group(2)) for m in ROLE.finditer(markdown)}


def _key(spec):
    return spec.rpartition(":")[0] if ":" in spec else spec


def paste(markdown, glued):
    """``markdown`` with each glue role replaced by its value from
    ``glued`` (``{key: display data}``): ``{glue:md}`` pastes the value's
    Markdown, ``{glue:text}`` (and a bare ``{glue}``) its plain text,
    formatted, with Markdown's markup escaped; a key not glued yet reads
    `LATER`. MyST comment lines are dropped, and a ``{doc}`` role becomes
    its text."""
    def one(match):
        kind, spec = match.group(1) or "text", match.group(2)
        key = _key(spec)
        fmt = spec[len(key) + 1:]
        data = glued.get(key)
        if data is None:
            return LATER
        if kind == "md" and "text/markdown" in data:
            return _text(data["text/markdown"]).strip()
        text = format_plain_text(_text(data.get("text/plain", "")), fmt)
        return _MARKUP.sub(r"\\\1", text)

    markdown = COMMENT.sub("", markdown)
    markdown = OTHER_ROLE.sub(lambda m: m.group(2) or m.group(3), markdown)
    return ROLE.sub(one, markdown)


def glued_in(nb):
    """``{key: display data}`` of every value glued in the stored outputs
    of ``nb`` (a notebook as a dict), prefixes dropped: what `paste`
    reads when no kernel glued them (``tools/prose_cells.py``)."""
    from .store import GLUE_PREFIX
    found = {}
    for cell in nb["cells"]:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" \
                else []:
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                found[name] = {k.removeprefix(GLUE_PREFIX): v
                               for k, v in out.get("data", {}).items()}
    return found


def cell_sources(nb, ids):
    """The sources of the markdown cells of ``nb`` with ``ids``, in
    order, joined as the book parses them: one after another."""
    by_id = {c.get("id"): c for c in nb["cells"]}
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise KeyError(f"no cell {', '.join(missing)} in the lesson")
    return "\n\n".join(_text(by_id[i]["source"]) for i in ids)


def show(lesson, *ids):
    """Show the cells ``ids`` of notebook ``lesson`` (read from ``book/``)
    as Markdown, with the values this kernel glued
    (`src.reference.glue.glued`). A value that a cell further down glues
    reads `LATER` until that cell runs; whenever a value the text quotes
    is glued again (a cell further down, or one the reader runs again),
    the shown text is filled in anew (`pending`, an IPython display
    update)."""
    from IPython.display import display
    from .glue import after_glue, glued
    if update not in after_glue:
        after_glue.append(update)
    nb = json.loads((BOOK / f"{lesson}.ipynb").read_text())
    markdown = cell_sources(nb, ids)
    # a display id of its own each time: nbclient fails on one shown again
    # in a cell that ran again
    display_id = f"prose-{lesson}-{ids[0]}-{next(_shown)}"
    display({"text/markdown": paste(markdown, glued)}, raw=True,
            display_id=display_id)
    pending[(lesson, ids)] = (display_id, markdown, keys(markdown))


def update(name):
    """Fill ``name``, just glued, into the shown texts that quote it
    (`show`)."""
    from IPython.display import display
    from .glue import glued
    for display_id, markdown, quoted in pending.values():
        if name in quoted:
            display({"text/markdown": paste(markdown, glued)}, raw=True,
                    display_id=display_id, update=True)
