"""Running: a mutant's selected tests on the mutated copy, under time
limits, and what their exit says of it."""
import os
import re
import subprocess
import time

from .coverage_map import _env
from .plugin import _test_of
from .sites import apply


def run_one(copy, python, m, tests, cmap, args):
    path = copy / m.file
    original = path.read_text(encoding="utf-8")
    budget = sum(cmap["tests"][t]["seconds"] for t in tests)
    limit = min(args.cap, args.timeout_floor + args.timeout_factor * budget)
    # a mutant that makes a wait hang: pytest-timeout fails that test
    # long before the whole run's limit (a lesson's cells count one by one)
    per_test = max(args.test_timeout, args.timeout_factor * max(
        [_longest(cmap["tests"][t]) for t in tests] or [0]))
    t0 = time.monotonic()
    if not tests:
        return "survived", 0.0, limit, "no test reaches this line"
    path.write_text(apply(original, m), encoding="utf-8")
    try:
        r = subprocess.run([python, "-m", "pytest", "-x", "-q",
                            "-p", "no:cacheprovider", "--no-header",
                            "-o", "console_output_style=classic",
                            "-o", f"timeout={per_test:.0f}"] + tests,
                           cwd=copy, env=_env(copy), capture_output=True,
                           text=True, timeout=limit,
                           start_new_session=True)
        code = r.returncode
        failed = _failed(r.stdout)
        tail = (r.stdout.strip().splitlines() or [""])[-1]
        if failed:
            tail = f"{failed[0]}: {tail}"
    except subprocess.TimeoutExpired as e:
        code, tail = None, f"timed out after {limit:.0f} s"
        _kill_group(e)
    finally:
        path.write_text(original, encoding="utf-8")
    seconds = time.monotonic() - t0
    outcome = _outcome(code, "" if code is None else r.stdout)
    if outcome == "error":
        tail = f"pytest exit {code}: {tail}"
    return outcome, seconds, limit, tail


def _outcome(code, stdout):
    """What pytest's exit ``code`` (None: past the time limit) and output
    say of a mutant."""
    if code is None:
        return "timeout"
    if code == 0:
        return "survived"
    if code == 1 and "Failed: Timeout" in stdout:
        return "timeout"
    if code in (1, 2, 3):
        return "killed"
    if code == 4 and "ERROR collecting" in stdout:
        # a test module no longer imports (it did in the map's run): pytest
        # then finds none of the tests named in it, a usage error (4)
        return "killed"
    return "error"


def _failed(stdout):
    """The tests (a lesson for its cells) in pytest's short summary."""
    out = []
    for line in stdout.splitlines():
        hit = re.match(r"(?:FAILED|ERROR) (.+?)(?: - .*)?$", line)
        if hit and _test_of(hit[1]) not in out:
            out.append(_test_of(hit[1]))
    return out


def _longest(t):
    return t.get("longest", t["seconds"])


def confirm(copy, python, test, args):
    """Does `test` pass on the original code, run alone? A test that fails
    there too (flaky under load, or hurt by running out of its file's
    order) proves nothing about the mutant."""
    try:
        r = subprocess.run([python, "-m", "pytest", "-q",
                            "-p", "no:cacheprovider", test], cwd=copy,
                           env=_env(copy), capture_output=True, text=True,
                           timeout=args.cap, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        _kill_group(e)
        return False
    return r.returncode == 0


def _kill_group(e):
    """subprocess.run killed pytest; its kernels are in its session."""
    pid = getattr(getattr(e, "process", None), "pid", None)
    if pid:
        try:
            os.killpg(pid, 9)
        except (ProcessLookupError, PermissionError):
            pass



def run_mutant(copy, python, m, tests, cmap, args, log):
    """`run_one`, checked: a killing test that fails on the original code
    too proves nothing, so the mutant runs again, and is an *error* when
    that happens twice. ``(outcome, seconds, limit, note)``."""
    outcome, seconds, limit, note = run_one(copy, python, m, tests, cmap,
                                            args)
    culprit = note.split(": ", 1)[0] if outcome == "killed" else ""
    if culprit in tests and not confirm(copy, python, culprit, args):
        # the killing test fails without the mutant: run it again
        log(f"  {culprit} fails on the original code too; again")
        outcome, seconds2, limit, note = run_one(copy, python, m, tests,
                                                 cmap, args)
        seconds += seconds2
        culprit = note.split(": ", 1)[0] if outcome == "killed" else ""
        if culprit in tests and not confirm(copy, python, culprit, args):
            outcome, note = "error", f"flaky: {note}"
    return outcome, seconds, limit, note
