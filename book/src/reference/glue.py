"""The book's `glue`: myst_nb's, without myst_nb in a reader's kernel.

`glue` publishes exactly the display bundle ``myst_nb.glue`` does (each
MIME type of the value's display data, prefixed with `GLUE_PREFIX` when not
displayed, and ``metadata["scrapbook"] = {"name", "mime_prefix"}``), so
that the book build pastes it and `read_glued` reads it unchanged; but it
imports only IPython's display machinery, which a kernel has already
loaded, where ``myst_nb`` brings ``nbformat``, ``jsonschema`` and
``docutils`` into every lesson (tests/test_reference.py compares the two
bundles).

`GluedValues` is the dict of a lesson's glued values (`Lesson.values`): a
value that no cell glued in this run, because the cell that measures it
stopped or was edited, is a `NotGlued` error, shown in one line.
"""
from .store import GLUE_PREFIX

#: ``{name: display data}`` of every value glued in this kernel, the
#: latest of each name: what `src.reference.prose.show` pastes into a
#: lesson's sentences in JupyterLab.
glued = {}
#: What runs with each name just glued (`src.reference.prose.update`
#: fills it into the texts shown before it was glued).
after_glue = []


def glue(name, variable, display=True):
    """Glue ``variable`` under ``name`` as ``myst_nb.glue`` does: its display
    data, shown (``display=True``) or recorded only (MIME types prefixed
    with `GLUE_PREFIX`)."""
    from IPython.core.formatters import format_display_data
    from IPython.display import display as publish
    bundle, metadata = format_display_data(variable)
    prefix = "" if display else GLUE_PREFIX
    metadata["scrapbook"] = dict(name=name, mime_prefix=prefix)
    glued[name] = bundle
    publish({prefix + k: v for k, v in bundle.items()}, raw=True,
            metadata=metadata)
    for hook in after_glue:
        hook(name)


class NotGlued(KeyError):
    """A value the lesson quotes that no cell glued in this run. IPython
    shows it in one line (`_render_traceback_`), as the message says what
    to do; anywhere else it is a KeyError of the key."""

    def __init__(self, key, lesson=""):
        super().__init__(key)
        self.key, self.lesson = key, lesson

    def __str__(self):
        where = f" of {self.lesson}" if self.lesson else ""
        return (f"{self.key!r} was not measured in this run{where}: the "
                "cell that measures it stopped with an error, or was "
                "edited, before it glued the value. Run the cells above "
                "this one again, in order, or restart and run all.")

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


class GluedValues(dict):
    """``{name: value}`` of what a lesson glued in this run; a name that
    was not glued raises `NotGlued` (a KeyError) in one line."""

    def __init__(self, lesson=""):
        super().__init__()
        self.lesson = lesson

    def __missing__(self, key):
        raise NotGlued(key, self.lesson)
