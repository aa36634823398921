"""Sphinx extension: drop a table column that holds only dashes.

A lesson's inline table shows this run's numbers beside the reference
GPU's, pasted from ``NAME_ref`` glue. A value the reference GPU has not
measured pastes as a dash (`src.reference.MISSING`), so a table none of
whose values the GPU measured would show a whole column of dashes. This
drops such a column from the page: a column, other than the first, whose
every body cell reads exactly a dash. Once a GPU run captures the values,
the column shows again by itself. The notebook is unchanged.
"""
from docutils import nodes

MISSING = "\u2014"          # src.reference.MISSING


def dash_columns(tgroup):
    """Indices (past the first) of ``tgroup``'s columns whose every body
    cell reads `MISSING`; none when the body is empty or a row spans."""
    body = next(iter(tgroup.findall(nodes.tbody)), None)
    width = len(list(tgroup.findall(nodes.colspec)))
    rows = [] if body is None else [
        [entry.astext().strip() for entry in row.children
         if isinstance(entry, nodes.entry)]
        for row in body.children if isinstance(row, nodes.row)]
    if not rows or any(len(row) != width for row in rows):
        return []
    return [i for i in range(1, width)
            if all(row[i] == MISSING for row in rows)]


def drop_dash_columns(app, doctree):
    for tgroup in list(doctree.findall(nodes.tgroup)):
        drop = set(dash_columns(tgroup))
        if not drop:
            continue
        colspecs = [c for c in tgroup.children
                    if isinstance(c, nodes.colspec)]
        for i in sorted(drop, reverse=True):
            tgroup.remove(colspecs[i])
        for row in tgroup.findall(nodes.row):
            entries = [e for e in row.children if isinstance(e, nodes.entry)]
            if len(entries) == len(colspecs):
                for i in sorted(drop, reverse=True):
                    row.remove(entries[i])
        tgroup["cols"] = len(colspecs) - len(drop)


def setup(app):
    app.connect("doctree-read", drop_dash_columns)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
