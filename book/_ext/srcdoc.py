"""Sphinx extension: the API reference of `src` (book/src), one line a module.

The build imports `src` once here, with ``BOOK_BACKEND=cpu`` set only for
that import, so autodoc never needs a GPU, while the notebooks the build
executes (in their own kernels) still choose their backend from the
reader's environment. The ``src-modules`` directive turns each module name
in its body into a section holding ``automodule``'s output.
"""
import importlib
import os
import sys
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective
from sphinx.util.parsing import nested_parse_to_nodes

BOOK = Path(__file__).resolve().parents[1]


def _import_src_on_cpu():
    """Import `src` on the CPU device model; leave the environment as is."""
    if str(BOOK) not in sys.path:
        sys.path.insert(0, str(BOOK))
    before = os.environ.get("BOOK_BACKEND")
    os.environ["BOOK_BACKEND"] = "cpu"
    try:
        src = importlib.import_module("src")
    finally:
        if before is None:
            del os.environ["BOOK_BACKEND"]
        else:
            os.environ["BOOK_BACKEND"] = before
    if Path(src.__file__).resolve().parent != BOOK / "src":
        raise ImportError(f"`src` was imported from {src.__file__}, not from "
                          f"{BOOK / 'src'}: another package is called src")


class SrcModules(SphinxDirective):
    """``.. src-modules::``, one module a line: a titled section for each."""

    has_content = True

    def run(self):
        sections = []
        for name in (line.strip() for line in self.content):
            if not name:
                continue
            section = nodes.section(names=[name])
            section += nodes.title("", "", nodes.literal(name, name))
            section += nested_parse_to_nodes(
                self.state, f".. automodule:: {name}",
                source=self.get_source_info()[0])
            self.state.document.note_implicit_target(section, section)
            sections.append(section)
        return sections


def setup(app):
    _import_src_on_cpu()
    app.add_directive("src-modules", SrcModules)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
