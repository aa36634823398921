"""Lazy start-up, measured: the first operations of a fresh Python process.

The runtime starts on first use, so its cost lands on the first operation.
That can only be measured once per process: `in_fresh_processes` starts new
interpreters (in ``book/``, on this backend) that import `src` and time
`time_first_ops`, so the first operation there really is the first. The
operations are timed by the book's host clock (`src.timing.host_clock`:
modelled on the CPU device model); the import, which runs before `src`
exists, by ``time.perf_counter``.
"""
import json
import subprocess
import sys
from pathlib import Path

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


def in_fresh_processes(runs=5, n_ops=10, size=1000, timeout=300):
    """`time_first_ops` in ``runs`` new interpreters, one after another;
    each result also has ``import_s`` (importing `src`) and ``backend``."""
    code = _CHILD.format(n_ops=int(n_ops), size=int(size))
    results = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", code], cwd=BOOK,
                              capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError("the fresh process failed:\n" + done.stderr)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results
