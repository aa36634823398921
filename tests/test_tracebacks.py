"""How errors read in a reader's kernel (IPython): the book sets no
traceback mode; an error the book raises for the reader's call shows the
reader's lines and the message, none of ``src``'s frames (src._tracebacks);
a value a hidden cell quotes that no cell glued is one line."""
import re

import subproc

ANSI = re.compile(r"\x1b\[[0-9;]*m")

#: Cells run one by one in a fresh IPython shell, each output after a
#: separator line.
CELLS = [
    "from src import cp, cpx, banner",
    "with cp.cuda.Device(99):\n    cp.ones(3)",
    "from src.loops import fori_loop\n"
    "fori_loop(0, 3, lambda i, x: x[1:], cp.ones(4))",
    "a = cp.ones(2)\nwith cp.cuda.Device(1):\n    b = cp.ones(2)\na + b",
    "from src.reference import Lesson\nref = Lesson('04_1_queueing')\n"
    "pair_ms = ref.values['pair_ms']",
    "x = 1\nundefined_name + x",
    "print(get_ipython().InteractiveTB.mode)",
]


def run_cells():
    code = ("from IPython.core.interactiveshell import InteractiveShell\n"
            "shell = InteractiveShell.instance(colors='nocolor')\n"
            f"for cell in {CELLS!r}:\n"
            "    print('=== cell', flush=True)\n"
            "    shell.run_cell(cell)\n")
    r = subproc.output(code, backend="cpu")
    return [ANSI.sub("", part).strip()
            for part in r.split("=== cell")[1:]]


def test_errors_show_the_readers_lines_and_the_kernels_mode_is_left():
    _, device, loop, peer, missing, own, mode = run_cells()
    for shown, error in ((device, "CUDARuntimeError: cudaErrorInvalid"),
                         (loop, "ValueError: fori_loop: at i=0"),
                         (peer, "ValueError: The device where the array")):
        assert "Cell In[" in shown and "---->" in shown, shown
        assert "src/" not in shown and "File " not in shown, shown
        assert shown.splitlines()[-1].startswith(error), shown
    assert "----> 4 a + b" in peer
    assert missing.splitlines() == [missing], missing
    assert missing.startswith("NotGlued: 'pair_ms' was not measured in "
                              "this run of 04_1_queueing")
    assert "line 2" in own and "NameError" in own, own
    assert mode == "Context"
