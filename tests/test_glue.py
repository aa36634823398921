"""The book's glue (src.reference.glue): myst_nb's display bundle, without
myst_nb in a reader's kernel; and a value no cell glued, said in one line.
"""
import json

import pytest

import subproc
from src.reference import glue as G

#: Glue the same values with the book's glue and myst_nb's in one IPython
#: shell; print each pair of published bundles (data and metadata).
BOTH = """
import json
from IPython.core.interactiveshell import InteractiveShell
from IPython.display import Markdown
from IPython.utils.capture import capture_output
import myst_nb
from src.reference import FigureData, Text
from src.reference.glue import glue

InteractiveShell.instance()
values = [("f", 3.25), ("i", 2929), ("big", 12345678901), ("s", "it's"),
          ("t", Text("2,929")), ("t2", Text("faster")),
          ("md", Markdown("`set` is *on*")),
          ("fig", FigureData({"x": [1, 2], "y": [0.5, 0.25]})),
          ("none", None), ("flag", True), ("l", [1, 2.5])]
pairs = []
for display in (True, False):
    for name, value in values:
        got = []
        for fn in (glue, myst_nb.glue):
            with capture_output() as cap:
                fn(name, value, display=display)
            got.append([[o.data, o.metadata] for o in cap.outputs])
        pairs.append([name, display, *got])
print(json.dumps(pairs))
"""


def test_the_books_glue_publishes_myst_nbs_bundle():
    pytest.importorskip("myst_nb")
    pairs = json.loads(subproc.output(BOTH))
    assert len(pairs) == 22
    for name, display, ours, theirs in pairs:
        assert ours == theirs, (name, display)
        assert len(ours) == 1
        data, meta = ours[0]
        assert meta["scrapbook"] == {
            "name": name,
            "mime_prefix": "" if display else G.GLUE_PREFIX}
        assert all(k.startswith(meta["scrapbook"]["mime_prefix"])
                   for k in data)


#: A lesson's set-up in a fresh IPython shell after ``from src import cp``:
#: how long the machinery takes, and what it imported.
SETUP = """
import json, sys, time
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
shell = InteractiveShell.instance()
shell.run_cell("from src import cp, cpx, banner", silent=True)
before = set(sys.modules)
t = time.perf_counter()
with capture_output():
    shell.run_cell('''
from src.reference import Lesson
ref = Lesson("04_1_queueing")
glue = ref.glue
ref.glue_device()
profile = ref.glue_profile()
glue("x_ms", 1.5, display=False)
''', silent=True)
took = time.perf_counter() - t
print(json.dumps({"s": took, "new": sorted(
    m.split(".")[0] for m in set(sys.modules) - before)}))
"""


def test_a_lessons_machinery_imports_nothing_heavy():
    """No myst_nb (nor the nbformat, jsonschema and docutils it brings) in
    a reader's kernel; the set-up takes a fraction of a second (0.3 s on
    an idle machine; the bound here leaves room for a loaded one)."""
    run = json.loads(subproc.output(SETUP, backend="cpu"))
    heavy = {"myst_nb", "nbformat", "jsonschema", "docutils", "sphinx"}
    assert not heavy & set(run["new"]), run["new"]
    assert run["s"] < 1.5, run


def test_a_value_no_cell_glued_is_one_line_naming_it():
    values = G.GluedValues("04_1_queueing")
    values["queue_ms"] = 1.0
    assert values["queue_ms"] == 1.0 and values == {"queue_ms": 1.0}
    with pytest.raises(KeyError) as caught:
        values["pair_ms"]
    error = caught.value
    assert isinstance(error, G.NotGlued)
    (line,) = error._render_traceback_()
    assert line.startswith("NotGlued: 'pair_ms' was not measured in this "
                           "run of 04_1_queueing")
    assert "Run the cells above" in line
    assert values.get("pair_ms") is None and "pair_ms" not in values
