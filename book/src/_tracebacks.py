"""How an error the book raises for the reader's call reads in a notebook.

The CPU device model raises CUDA's errors, and the book's helpers raise
theirs, for a mistake in the reader's code: the lines to show are the
reader's, not the frames inside ``src`` that found the mistake (a GPU run
shows CuPy's compiled code as little). IPython shows an exception through
its ``_render_traceback_`` when it has one; `reader_traceback` is that
method: IPython's own traceback, in whatever mode the kernel is in, of the
frames outside ``src``, then the message. Nothing is set for the kernel:
every other error reads as IPython shows it.

An exception class takes it as its method (``_render_traceback_ =
reader_traceback``); `shown` gives it to one exception (a ValueError that
CuPy raises as a plain ValueError).
"""
import os
import traceback
import types

#: Frames in files below this folder are the book's, not the reader's.
SRC = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _outside_src(tb):
    """The traceback ``tb`` without its frames inside ``src``."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(SRC):
            kept.append(tb)
        tb = tb.tb_next
    outer = None
    for entry in reversed(kept):
        outer = types.TracebackType(outer, entry.tb_frame, entry.tb_lasti,
                                    entry.tb_lineno)
    return outer


def reader_traceback(error):
    """``error``'s traceback as IPython's lines (a list of strings), the
    frames inside ``src`` and the exceptions it was raised from left
    out."""
    tb = _outside_src(error.__traceback__)
    saved = error.__cause__, error.__context__, error.__suppress_context__
    error.__cause__ = error.__context__ = None
    try:
        from IPython import get_ipython
        shell = get_ipython()
        if shell is None:
            return traceback.format_exception(type(error), error, tb)
        return shell.InteractiveTB.structured_traceback(
            type(error), error, tb)
    finally:
        (error.__cause__, error.__context__,
         error.__suppress_context__) = saved


def shown(error):
    """``error``, shown by IPython through `reader_traceback`: ``raise
    shown(ValueError(...))``."""
    error._render_traceback_ = lambda: reader_traceback(error)
    return error
