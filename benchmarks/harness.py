"""The harness of `benchmarks/run.py`: the figures' registry, the clocks
a figure is timed with, running the figures and printing their table."""
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "book"))
from src import BACKEND, cp, device_names  # noqa: E402

FIGURES = []


def figure(key, unit, goal):
    """Register ``fn(quick) -> list of samples`` as figure ``key``."""
    def register(fn):
        FIGURES.append((key, unit, goal, fn))
        return fn
    return register


def sync():
    cp.cuda.Device().synchronize()


def clock(fn, repeats):
    """Wall seconds of ``fn()`` (which must synchronize), ``repeats`` times."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out



def event_seconds(fn, repeats):
    """Seconds of ``fn()``'s device work by events on the current stream
    (`src.timing.EventTimer`: start, queue the work, end, then wait),
    ``repeats`` times after a warm-up."""
    from src.timing import EventTimer
    fn()
    sync()
    out = []
    for _ in range(repeats):
        with EventTimer() as timer:
            fn()
        out.append(timer.seconds)
    return out


def command_seconds(argv):
    """Wall seconds of the command ``argv`` run in the project's root; its
    output's tail in the error when it fails."""
    t = time.perf_counter()
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True,
                       timeout=1200)
    if r.returncode:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{r.stdout[-3000:]}"
                           f"\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


def run(keys=None, quick=False):
    """Measure the figures (all, or ``keys``); return the JSON object."""
    result = {"backend": BACKEND, "devices": device_names(),
              "machine": {"cpus": os.cpu_count(), "python":
                          platform.python_version(), "platform":
                          platform.platform(), "numpy": numpy.__version__},
              "quick": quick, "units": {}, "goals": {}, "spread": {}}
    for key, unit, goal, fn in FIGURES:
        if keys and key not in keys:
            continue
        samples = fn(quick)
        result[key] = statistics.median(samples)
        result["units"][key] = unit
        result["goals"][key] = goal
        result["spread"][key] = {"min": min(samples), "max": max(samples),
                                 "n": len(samples)}
    return result


def table(result):
    lines = [f"backend: {result['backend']}  devices: "
             f"{', '.join(result['devices'])}",
             f"{'figure':<28}{'median':>10}{'min':>10}{'max':>10}  unit"
             "        goal"]
    for key, spread in result["spread"].items():
        lines.append(f"{key:<28}{result[key]:>10.3f}{spread['min']:>10.3f}"
                     f"{spread['max']:>10.3f}  {result['units'][key]:<11} "
                     f"{result['goals'][key]}")
    return "\n".join(lines)
