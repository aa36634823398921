"""The book reads a lesson's raw markdown cells as markdown.

A lesson keeps two kinds of its text in *raw* cells of format
``text/markdown`` (``metadata.format``), so that JupyterLab keeps them
collapsed even after Run All, which expands every markdown cell it runs:
the sentences that paste glued values (JupyterLab shows them, numbers
filled in, in the ``jupyterlab-prose`` cell below them) and the
exercises' solutions (``tools/execute.py`` lays both out;
``src.reference.prose`` says more). `read`, the book's notebook reader
(``nb_custom_formats`` in ``_config.yml``), turns each such cell back
into the markdown cell it was, so the page is the same.
"""
import importlib.util
from pathlib import Path

import nbformat

_PROSE = Path(__file__).resolve().parents[1] / "src" / "reference" / \
    "prose.py"


def _prose():
    """``src.reference.prose`` read on its own, without importing `src`
    (its module level needs nothing of the package)."""
    spec = importlib.util.spec_from_file_location("book_prose", _PROSE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


as_book = _prose().as_book


def read(text):
    """A notebook as myst-nb reads one (``nbformat.reads``), with its raw
    markdown cells as markdown cells (`as_book`)."""
    return as_book(nbformat.reads(text, as_version=4))


def setup(app):
    return {"parallel_read_safe": True, "parallel_write_safe": True}
