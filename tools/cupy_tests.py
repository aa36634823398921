"""Run CuPy's own tests on the CPU device model (through `cupy_adapter`).

    python tools/cupy_tests.py --git-dir PATH [--ref v14.2.0] [--all]
    python tools/cupy_tests.py --source DIR [--all] [-- PYTEST-ARGS]

The tests come from a clone of CuPy (``--git-dir``: its git directory, read
at tag ``--ref`` with ``git show``, as the ``fetch`` tool's mirror gives it)
or from a checkout (``--source``: the folder holding ``tests/``). They are
not in this repository: CI has no network but to package registries, so
the same behaviour is held in CI by the model's own contract tests
(``tests/cpudevice/test_interop.py``, ``test_stream.py``,
``test_memory.py``).

By default the classes issue 50 asks for run: ``TestCUDAStreamProtocol``
and ``TestExternalStream`` of ``cuda_tests/test_stream.py``,
``TestUnownedMemoryClass``, ``TestUnownedMemory``, ``TestMemoryPointer``
and ``TestMemoryPointerAsync`` of ``cuda_tests/test_memory.py``; ``--all``
runs every test of both files (for information: many test CuPy's pool
internals, which the model does not have). The files are copied into a
temporary folder beside a conftest that installs the adapter, and pytest
runs there, in a process of its own, under a timeout. It prints pytest's
report, then the counts per class (CuPy's parameterized classes counted
under their base's name) with each skip's reason. The exit status is
pytest's.
"""
import argparse
import collections
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
FILES = ("cupy_tests/cuda_tests/test_stream.py",
         "cupy_tests/cuda_tests/test_memory.py")
CLASSES = {"test_stream.py": ["TestCUDAStreamProtocol", "TestExternalStream"],
           "test_memory.py": ["TestUnownedMemoryClass", "TestUnownedMemory",
                              "TestMemoryPointer", "TestMemoryPointerAsync"]}
CONFTEST = f"""\
import sys
sys.path.insert(0, {str(TOOLS)!r})
import cupy_adapter
cupy_adapter.install()
pytest_collection_modifyitems = cupy_adapter.pytest_collection_modifyitems
"""
INI = """\
[pytest]
markers =
    thread_unsafe: CuPy's mark for tests that are not thread-safe
    slow: CuPy's mark for slow tests
    multi_gpu: CuPy's mark for tests that need more than one GPU
"""


def read_tests(args):
    """``{file name: text}`` of the two test files."""
    out = {}
    for rel in FILES:
        if args.git_dir:
            text = subprocess.run(
                ["git", "--git-dir", args.git_dir, "show",
                 f"{args.ref}:tests/{rel}"], check=True, capture_output=True,
                text=True, timeout=60).stdout
        else:
            text = (Path(args.source) / "tests" / rel).read_text()
        out[Path(rel).name] = text
    return out


def selection(run_all):
    """pytest's arguments: the files, narrowed to the classes asked for."""
    if run_all:
        return list(CLASSES)
    names = [c for classes in CLASSES.values() for c in classes]
    # -k matches substrings: a parameterized class is Base_param_...
    return list(CLASSES) + ["-k", " or ".join(names)]


def summary(junit):
    """Counts per file and class (parameterized classes under their base),
    and the skip reasons, from pytest's JUnit XML."""
    counts = collections.defaultdict(collections.Counter)
    reasons = collections.defaultdict(set)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("classname", "")
        module, _, cls = name.rpartition(".") if "." in name else (name, "",
                                                                  "")
        key = f"{module}::{cls.partition('_param_')[0] or '(functions)'}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
                reasons[key].add(child.get("message", ""))
        counts[key][outcome] += 1
    lines = []
    for key in sorted(counts):
        c = counts[key]
        lines.append(f"{key}: {c['passed']} passed, {c['failed']} failed, "
                     f"{c['skipped']} skipped")
        lines += [f"    skipped: {r}" for r in sorted(reasons[key])]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--git-dir", help="a CuPy clone's git directory")
    where.add_argument("--source", help="a CuPy checkout (holds tests/)")
    parser.add_argument("--ref", default="v14.2.0",
                        help="the tag or commit read with --git-dir")
    parser.add_argument("--all", action="store_true",
                        help="every test of the two files")
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds for the whole run (default 600)")
    parser.add_argument("pytest_args", nargs="*",
                        help="more arguments for pytest (after --)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cupy-tests-") as tmp:
        tmp = Path(tmp)
        for name, text in read_tests(args).items():
            (tmp / name).write_text(text)
        (tmp / "conftest.py").write_text(CONFTEST)
        (tmp / "pytest.ini").write_text(INI)
        junit = tmp / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               "-q", "-rs", "--timeout", "120", f"--junitxml={junit}",
               *selection(args.all), *args.pytest_args]
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        r = subprocess.run(cmd, cwd=tmp, env=env, timeout=args.timeout)
        if junit.exists():
            print(f"\nCuPy {args.ref if args.git_dir else args.source}'s "
                  "tests on the CPU device model, per class:")
            print(summary(junit))
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
