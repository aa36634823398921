"""The benchmark harness runs and writes every figure (no speed asserted)."""
import json
import math
import os
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import run as bench  # noqa: E402

import subproc

JUPYTER_BOOK = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
# The figures that time the book's own toolchain (the test suite with its
# notebook plugins, and `jupyter-book build`): they need the book's tools
# installed beside this interpreter, which a bare GPU machine may not have.
TOOLCHAIN = {"test_suite_s", "book_build_s"}


def quick_run(tmp_path, keys):
    out = tmp_path / "bench.json"
    r = subproc.run(["benchmarks/run.py", "--quick", "--json", str(out),
                     "--only", *keys], cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    for key in keys:
        value = result[key]
        assert math.isfinite(value) and value > 0, (key, value)
        spread = result["spread"][key]
        assert spread["min"] <= value <= spread["max"], key
        assert key in r.stdout
    assert result["backend"] in ("cpu", "gpu") and result["devices"]
    return result


def test_every_figure_is_registered_once():
    keys = [k for k, *_ in bench.FIGURES]
    assert keys, "no figures registered"
    assert len(keys) == len(set(keys))
    assert TOOLCHAIN <= set(keys)


def test_quick_run_writes_every_device_figure_finite_and_positive(tmp_path):
    quick_run(tmp_path, [k for k, *_ in bench.FIGURES if k not in TOOLCHAIN])


@pytest.mark.slow                  # 11 s: CI runs it after the book build
@pytest.mark.skipif(not os.path.exists(JUPYTER_BOOK),
                    reason="test_suite_s and book_build_s time the book's "
                    f"toolchain, and no jupyter-book script is at "
                    f"{JUPYTER_BOOK} (install the book's requirements)")
def test_quick_run_writes_the_toolchain_figures(tmp_path):
    quick_run(tmp_path, sorted(TOOLCHAIN))
