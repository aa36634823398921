"""Make `src` (book/src) importable in tests, as it is in the lessons, and
the tests' own helpers (`modelkit`, `subproc`, `contractkit`) from every
folder of tests/ (tests/cpudevice/ too)."""
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
for path in (str(TESTS.parent / "book"), str(TESTS)):
    if path not in sys.path:
        sys.path.insert(0, path)


def pytest_runtest_teardown(item):
    """A test that failed before opening its gate must not stall the rest."""
    kit = sys.modules.get("modelkit")
    if kit is not None:
        kit.open_all_gates()


def pytest_terminal_summary(terminalreporter):
    """List the reference values that are stale or not captured, lesson by
    lesson: information for whoever has a GPU at hand, never a failure."""
    try:
        from src import reference
        states = reference.report()
        name = ", then ".join(
            reference.load(d).get("device", {}).get("name", d)
            for d in reference.reference_devices())
    except Exception as e:                  # noqa: BLE001  (never fail CI)
        terminalreporter.write_line(f"reference values: not read ({e})")
        return
    lines = []
    for lesson, by_state in states.items():
        for state in (reference.STALE, reference.NOT_CAPTURED):
            if by_state[state]:
                lines.append(f"{lesson} {state}: "
                             + ", ".join(sorted(by_state[state])))
    total = sum(len(v) for s in states.values() for v in s.values())
    terminalreporter.section(f"reference values ({name})", sep="-")
    if not lines:
        terminalreporter.write_line(
            f"all {total} glued values current or excluded")
        return
    for line in lines:
        terminalreporter.write_line(line)
    terminalreporter.write_line(
        "(to refresh them on a GPU: tools/gpu/run.sh lessons, then "
        "tools/gpu/refresh-reference.sh; see the README)")
