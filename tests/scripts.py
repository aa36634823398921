"""The project's scripts (``benchmarks/*.py``, ``tools/**/*.py``) loaded as
modules by path, for the tests that call their functions."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(relpath):
    """The script at ``relpath`` (from the project root), executed once as
    a module named after its file."""
    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
