"""The benchmark harness runs and writes every figure (no speed asserted)."""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_quick_run_writes_every_figure_finite_and_positive(tmp_path):
    out = tmp_path / "bench.json"
    r = subprocess.run([sys.executable, "benchmarks/run.py", "--quick",
                        "--json", str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    result = json.loads(out.read_text())
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import run as bench
    keys = [k for k, *_ in bench.FIGURES]
    assert keys, "no figures registered"
    for key in keys:
        value = result[key]
        assert math.isfinite(value) and value > 0, (key, value)
        spread = result["spread"][key]
        assert spread["min"] <= value <= spread["max"], key
        assert key in r.stdout
    assert result["backend"] in ("cpu", "gpu") and result["devices"]
