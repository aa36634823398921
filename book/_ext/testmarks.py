"""Sphinx extension: keep the tests' cell markers off the page.

A lesson's cell whose output the tests compare starts with nbval's marker
``# NBVAL_CHECK_OUTPUT`` (pytest.ini, lax mode). The marker is for the
tests, not for the reader: this drops that line from the code a page
shows. The notebook keeps it, so that nbval, and a reader who opens the
notebook, still see it.
"""
from docutils import nodes

MARKERS = ("# NBVAL_CHECK_OUTPUT",)


def without_markers(text):
    """``text`` less its lines that are only a test marker."""
    lines = text.split("\n")
    kept = [line for line in lines if line.strip() not in MARKERS]
    return "\n".join(kept) if len(kept) < len(lines) else text


def drop_markers(app, doctree):
    for block in doctree.findall(nodes.literal_block):
        parent = block.parent
        if parent is None or "cell_input" not in parent.get("classes", []):
            continue
        text = block.astext()
        shown = without_markers(text)
        if shown != text:
            block.children = [nodes.Text(shown)]
            block.rawsource = shown


def setup(app):
    app.connect("doctree-read", drop_markers)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
