"""The project's Python stays readable: no file of ``book/src``,
``benchmarks/`` or ``tools/`` is longer than `MAX_LINES`; one that grows
past it is split by what it does (as `src.reference`, the model's hardware
layer, ``benchmarks/fidelitykit`` and ``tools/mutatekit`` were)."""
from pathlib import Path

import pytest

MAX_LINES = 450
ROOT = Path(__file__).resolve().parents[1]
HELD = ("book/src", "benchmarks", "tools")


@pytest.mark.parametrize("folder", HELD)
def test_no_python_file_is_longer_than_the_limit(folder):
    base = ROOT / folder
    files = sorted(base.rglob("*.py"))
    assert files, f"no Python files under {folder}"
    long = {str(p.relative_to(ROOT)): n for p in files
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these files (over {MAX_LINES} lines): {long}"
