"""The one way tests run Python in a fresh process.

A child runs from ``book/`` (where ``import src`` works, as in the lessons)
with ``tests/`` on its path (so it can ``import modelkit``), and always
under a timeout: a child that hangs fails its test instead of the suite.
"""
import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
BOOK = ROOT / "book"
TIMEOUT_S = 120


def command(argv, *, backend=None, env=None, cwd=BOOK, timeout=TIMEOUT_S,
            alone=False):
    """Run ``argv`` in a fresh process: its ``CompletedProcess`` (text).

    ``backend`` sets ``BOOK_BACKEND`` (None: inherit this process's);
    ``env`` adds variables; the timeout is never unset. ``alone``: as a
    reader's downloaded file runs, with only ``PATH`` set and neither the
    book nor the tests on the path.
    """
    e = {"PATH": "/usr/bin:/bin"} if alone else dict(os.environ)
    e.update(env or {})
    if backend is not None:
        e["BOOK_BACKEND"] = backend
    if not alone:
        e["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(TESTS), str(BOOK), e.get("PYTHONPATH")) if p)
    return subprocess.run(list(argv), cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=timeout or TIMEOUT_S)


@contextlib.contextmanager
def server(argv, *, env=None, cwd=BOOK, log=None, timeout=1800):
    """Start ``argv`` in the background (a server: JupyterLab) for a
    ``with`` block, its output to the file ``log``, and stop it when the
    block ends, or kill it once ``timeout`` seconds have passed, whichever
    comes first: yields the ``Popen``."""
    e = dict(os.environ)
    e.update(env or {})
    out = open(log, "w") if log else subprocess.DEVNULL
    proc = subprocess.Popen(list(argv), cwd=cwd, env=e, stdout=out,
                            stderr=subprocess.STDOUT)
    limit = threading.Timer(timeout, proc.kill)
    limit.start()
    try:
        yield proc
    finally:
        limit.cancel()
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log:
            out.close()


def run(args, **kw):
    """``python *args`` (this interpreter) in a fresh process (`command`)."""
    return command([sys.executable, *args], **kw)


def run_code(code, **kw):
    """``python -c code`` in a fresh process (see `run`)."""
    return run(["-c", code], **kw)


def output(code, **kw):
    """The stripped stdout of ``python -c code``; fails the test (with the
    child's stderr) when the child fails."""
    r = run_code(code, **kw)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()
