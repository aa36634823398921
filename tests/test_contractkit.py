"""The contract machinery (`contractkit`) on small inputs of its own:
the magic stripping, the chain finder and the signature diff."""
import ast
import json
import types

import pytest

from contractkit import (Missing, find_chains, resolve, sig_of,
                         signature_differences, strip_magics, walk_book)


def test_walker_finds_rooted_chains_and_keywords():
    source = strip_magics(
        "%matplotlib inline\n"
        "from cupyx.profiler import benchmark\n"
        "s = cp.cuda.Stream(non_blocking=True)\n"
        "with cp.cuda.Device(0):\n"
        "    x = cp.asarray(h, blocking=False).get(stream=s)\n"
        "    !nvidia-smi\n"
        "t = %timeit -o -n 3 cp.cuda.Stream.null.synchronize()\n"
        "cpx.profiler.benchmark(f, (x,), n_repeat=5, **opts)\n"
        "x.sum(axis=0); np.cp.fake; cp_x.y\n")
    assert find_chains(source) == {
        "cp.cuda.Stream": {"non_blocking"},
        "cp.cuda.Device": set(),
        "cp.asarray": {"blocking"},
        "cp.cuda.Stream.null.synchronize": set(),
        "cpx.profiler.benchmark": {"n_repeat"},   # the import and the call
    }


def test_cell_magics_that_are_not_python_are_skipped():
    assert strip_magics("%%bash\necho cp.cuda.x") == ""
    assert find_chains(strip_magics(
        "%%timeit -n 2 x = cp.ones(3)\ncp.sum(x)")) == {
        "cp.ones": set(), "cp.sum": set()}


def test_signature_differences_name_kinds_and_defaults():
    assert signature_differences(sig_of("(a, b=1, *, c=True)"),
                                 sig_of("(self, a, b=1, *, c=True)")) == []
    assert signature_differences(sig_of("(a, *args, b=1, **kw)"),
                                 sig_of("(a, *rest, b=1, **options)")) == []
    assert signature_differences(sig_of("(a, b=1, *, c=True)"),
                                 sig_of("(a, c=True, *, b=1, d=0)")) == [
        "the model adds d",
        "the parameters are in another order",
        "b is positional or keyword in CuPy, keyword-only in the model",
        "c is keyword-only in CuPy, positional or keyword in the model"]
    assert signature_differences(sig_of("(x, blocking=True, n=1, s='C')"),
                                 sig_of("(x, blocking=1, n=1.0, s='F')")) == [
        "blocking defaults to True in CuPy, 1 in the model",
        "n defaults to 1 in CuPy, 1.0 in the model",
        "s defaults to 'C' in CuPy, 'F' in the model"]


def test_a_wrapped_modulo_is_not_taken_for_a_magic():
    source = "n = (a\n     % b)\nx = cp.ones(n)\n%time y = cp.zeros(3)"
    code = strip_magics(source)
    assert "% b" in code and "y = cp.zeros(3)" in code
    ast.parse(code)


def test_walker_finds_nvml_chains():
    source = ("from pynvml import nvmlInit\n"
              "h = nvml.nvmlDeviceGetHandleByIndex(0)\n"
              "nvml.nvmlDeviceGetMemoryInfo(h, version=nvml.nvmlMemory_v2)\n")
    assert find_chains(source) == {
        "nvml.nvmlInit": set(),
        "nvml.nvmlDeviceGetHandleByIndex": set(),
        "nvml.nvmlDeviceGetMemoryInfo": {"version"},
        "nvml.nvmlMemory_v2": set(),
    }


def test_the_walk_reads_cells_and_names_code_that_does_not_parse(tmp_path):
    cells = [{"cell_type": "markdown", "source": "cp.not_code"},
             {"cell_type": "code", "source": ["x = cp.ones(3,\n", " dtype=d)"]},
             {"cell_type": "code", "source": "def ("}]
    (tmp_path / "a.ipynb").write_text(json.dumps({"cells": cells}))
    (tmp_path / "src").mkdir()
    keywords, where, errors = walk_book(tmp_path)
    assert keywords == {"cp.ones": {"dtype"}}
    assert where == {"cp.ones": ["a.ipynb cell 2"]}
    assert len(errors) == 1
    assert errors[0].startswith("a.ipynb cell 3: SyntaxError")


def test_resolve_names_the_first_missing_prefix():
    root = types.ModuleType("root")
    root.a = types.SimpleNamespace(b=1)
    assert resolve(root, "cp.a.b") == 1
    with pytest.raises(Missing, match=r"^cp\.a\.c$"):
        resolve(root, "cp.a.c.d")
