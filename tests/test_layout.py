"""How the tests themselves are written.

No test names a private of ``src``: private state is read through the
probes in ``tests/modelkit.py`` (the one file exempt), so a change inside
the model is mended there. The rule, checked on each file's AST:

* ``from src... import _x`` (or ``import src._x``, ``from src._x import``)
  is refused;
* ``name._x`` is refused when ``name`` was bound by importing from ``src``
  (``import src.cpudevice as cp``, ``from src import twins``, ...).

Dunder names (``__name__``) and a namedtuple's own ``_replace``,
``_asdict``, ``_fields`` and ``_make`` are public. Strings (code run in a
child process) are not parsed: children import ``modelkit`` too.
"""
import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
EXEMPT = {"modelkit.py"}
PUBLIC = {"_replace", "_asdict", "_fields", "_make"}


def private(name):
    return (name.startswith("_") and not name.startswith("__")
            and name not in PUBLIC)


def from_src(module):
    return module == "src" or (module or "").startswith("src.")


def private_references(tree):
    """(line, text) for each reference to a private of ``src``."""
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if from_src(alias.name):
                    if any(private(p) for p in alias.name.split(".")):
                        found.append((node.lineno, f"import {alias.name}"))
                    bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and from_src(node.module):
            parts = node.module.split(".")
            for alias in node.names:
                if any(private(p) for p in [*parts, alias.name]):
                    found.append((node.lineno, f"from {node.module} "
                                  f"import {alias.name}"))
                bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            root = node.value
            while isinstance(root, (ast.Attribute, ast.Call,
                                    ast.Subscript)):
                root = root.func if isinstance(root, ast.Call) else root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append((node.lineno, f"{root.id}....{node.attr}"))
    return found


def files_to_check():
    return sorted(p for p in TESTS.rglob("*.py") if p.name not in EXEMPT)


@pytest.mark.parametrize("path", files_to_check(),
                         ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_names_a_private_of_src(path):
    found = private_references(ast.parse(path.read_text(encoding="utf-8")))
    assert not found, (
        f"{path.name} reaches into src's privates (add a probe to "
        f"tests/modelkit.py instead): {found}")


@pytest.mark.parametrize("code, bad", [
    ("from src.cpudevice.cuda.device import _state", True),
    ("from src.cpudevice import _hardware", True),
    ("import src.cpudevice._core", True),
    ("from src import twins\ntwins._TWINS.pop('x')", True),
    ("import src.nvmlmodel as nvml\nnvml._refcount", True),
    ("from src import cp\ncp.cuda.Device(0)._stack", True),
    ("from src import loops\nloops.EULER._replace(step=None)", False),
    ("from src import cp\ncp.__name__", False),
    ("import numpy\nnumpy._core", False),
    ("from modelkit import hardware\nhardware.profile", False),
])
def test_the_rule_itself(code, bad):
    assert bool(private_references(ast.parse(code))) == bad


def child_processes(tree):
    """Lines that start a process other than through `subproc`."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("subprocess", "os")
            and node.attr in ("run", "Popen", "call", "check_call",
                              "check_output", "system", "popen")]


@pytest.mark.parametrize("path", [p for p in files_to_check()
                                  if p.name != "subproc.py"],
                         ids=lambda p: str(p.relative_to(TESTS)))
def test_every_child_process_goes_through_subproc(path):
    """One runner (tests/subproc.py) starts every child, with a timeout."""
    lines = child_processes(ast.parse(path.read_text(encoding="utf-8")))
    assert not lines, f"{path.name}: use subproc.run/command at {lines}"
