"""The pytest plugin of the map's run (``-p mutatekit.plugin``): each test
names coverage's context, and each test's duration and outcome are kept."""
import json
import os
from pathlib import Path


def pytest_runtest_setup(item):
    """Name coverage's context after the running test (-p mutatekit.plugin)."""
    os.environ["MUTATE_TEST_ID"] = _test_of(item.nodeid)
    try:
        import coverage
        cov = coverage.Coverage.current()
    except ImportError:
        cov = None
    if cov is not None:
        cov.switch_context(_test_of(item.nodeid))


_DURATIONS = {}


def pytest_runtest_logreport(report):
    t = _test_of(report.nodeid)
    d = _DURATIONS.setdefault(t, {"seconds": 0.0, "passed": True,
                                  "longest": 0.0})
    d["seconds"] += report.duration
    d["longest"] = max(d["longest"], report.duration)   # a lesson's cell
    if report.failed:
        d["passed"] = False


def pytest_sessionfinish(session):
    path = os.environ.get("MUTATE_DURATIONS")
    if path:
        Path(path).write_text(json.dumps(_DURATIONS))


def _test_of(nodeid):
    """A lesson's cells share one kernel: the lesson is the test."""
    return nodeid.split("::")[0] if ".ipynb" in nodeid else nodeid
