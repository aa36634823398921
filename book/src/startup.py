"""Lazy start-up, measured: the first operations of a fresh Python process.

The runtime starts on first use, so its cost lands on the first operation.
That can only be measured once per process: `in_fresh_processes` starts new
interpreters (in ``book/``, on this backend) that import `src` and time
`time_first_ops`, so the first operation there really is the first. The
operations are timed by the book's host clock (`src.timing.host_clock`:
modelled on the CPU device model); the import, which runs before `src`
exists, by ``time.perf_counter``.

`run_python` runs code in a new interpreter that finds `src` however this
one found it (a lesson opened from anywhere, with ``book/`` put on
``sys.path``), and says what went wrong when the child fails.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from ._tracebacks import reader_traceback

BOOK = Path(__file__).resolve().parents[1]

_CHILD = """\
import json, time
t0 = time.perf_counter()
import src
import_s = time.perf_counter() - t0
from src.startup import time_first_ops
print(json.dumps(dict(time_first_ops({n_ops}, {size}),
                      import_s=import_s, backend=src.BACKEND)))
"""


def time_first_ops(n_ops=10, size=1000):
    """Seconds taken by each of ``n_ops`` identical small operations (create,
    reduce, copy the scalar back), and the pool's bytes before and after."""
    from . import cp
    from .timing import host_clock
    pool = cp.get_default_memory_pool()
    before = pool.total_bytes()
    seconds = []
    for _ in range(n_ops):
        t0 = host_clock()
        float(cp.ones(size).sum())
        seconds.append(host_clock() - t0)
    return {"op_s": seconds, "pool_bytes_before": before,
            "pool_bytes_after": pool.total_bytes()}


class ChildError(RuntimeError):
    """A child Python (`run_python`) failed: its message ends with the
    child's own error (shown in a notebook below the reader's lines)."""

    _render_traceback_ = reader_traceback


def run_python(code, env=None, timeout=300):
    """Run ``code`` in a new Python (this interpreter), in ``book/`` and
    with ``book/`` first on its ``PYTHONPATH``, so that it imports `src`
    from wherever this process did; ``env``: its environment (default:
    this process's). Returns what it printed; a failure raises
    `ChildError` with what the child wrote to stderr."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(BOOK), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", code], cwd=BOOK, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise ChildError(f"the child Python failed (exit status "
                         f"{done.returncode}):\n{done.stderr.strip()}")
    return done.stdout


def in_fresh_processes(runs=5, n_ops=10, size=1000, timeout=300):
    """`time_first_ops` in ``runs`` new interpreters, one after another;
    each result also has ``import_s`` (importing `src`) and ``backend``."""
    code = _CHILD.format(n_ops=int(n_ops), size=int(size))
    return [json.loads(run_python(code, timeout=timeout).strip()
                       .splitlines()[-1]) for _ in range(runs)]
