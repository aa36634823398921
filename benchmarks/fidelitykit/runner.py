"""Running: measure the effects' experiments, compare each effect with the
reference, and assemble the result that ``--json`` writes."""
import datetime
import os
import platform
import sys
import time

import numpy as np
from src import BACKEND, cp, device_names

from .calibration import CALIBRATION
from .compare import (BAND, FACTOR, evaluate_effects, load_reference,
                      summarize)
from .effects import EFFECTS
from .experiment import EXPERIMENTS, free_pools
from .sizes import GPU_SIZES, SIZES


def measure(effects, extra=(), experiments=EXPERIMENTS):
    """Run the experiments named in ``extra`` (the quick calibration ones),
    then those the effects need, from ``experiments`` (by name; default
    the registry): ``{experiment: numbers}``, and
    ``{experiment: error text}`` for those that failed. An interrupt (a
    time limit's SIGINT: tools/gpu/run.sh) stops the run there and
    returns what was measured, so that it is still written."""
    raw, errors = {}, {}
    for name in dict.fromkeys(list(extra) + [e.experiment for e in effects]):
        t0 = time.perf_counter()
        try:
            raw[name] = experiments[name]()
        except Exception as exc:            # report it, measure the rest
            errors[name] = f"{type(exc).__name__}: {exc}"
        except KeyboardInterrupt:
            errors[name] = ("KeyboardInterrupt: interrupted; this and the "
                            "experiments after it were not measured")
            break
        finally:
            free_pools()
        print(f"  {name:20s} {time.perf_counter() - t0:6.1f} s",
              file=sys.stderr)
    return raw, errors


def machine():
    return {"python": platform.python_version(), "numpy": np.__version__,
            "system": platform.system(), "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine()}


def device_properties(index=0):
    """The device's properties as ``getDeviceProperties`` gives them, the
    numbers and tuples of numbers (for `calibrate.py`: a profile reports
    them), and its name."""
    props = cp.cuda.runtime.getDeviceProperties(index)
    out = {}
    for key, value in props.items():
        if isinstance(value, bytes):
            value = value.decode(errors="replace").rstrip("\x00")
            if key != "name":
                continue
        elif isinstance(value, (tuple, list)):
            if not all(isinstance(v, int) for v in value):
                continue
            value = list(value)
        elif not isinstance(value, int):
            continue
        out[key] = value
    return out


def run(only=None, reference=None):
    """Measure the effects (all, or the keys in ``only``) and compare them
    with ``reference`` (a path; default: the same device's,
    `default_reference`)."""
    effects = [e for e in EFFECTS if not only or e.key in only]
    unknown = set(only or ()) - {e.key for e in EFFECTS}
    if unknown:
        raise SystemExit(f"unknown effects: {sorted(unknown)}")
    info, ref_of = load_reference(reference)
    t0 = time.perf_counter()
    raw, errors = measure(effects, () if only else CALIBRATION)
    return assemble(effects, raw, errors, info, ref_of,
                    time.perf_counter() - t0)


def judge(stored, reference=None):
    """A stored result (``--json``'s) judged again by the rules and the
    reference as they are now, from its measured numbers (``raw``):
    nothing is measured; its date, machine, devices and time are kept."""
    info, ref_of = load_reference(reference)
    effects = [e for e in EFFECTS if e.key in stored["effects"]]
    result = assemble(effects, stored["raw"], stored.get("errors", {}),
                      info, ref_of, stored.get("seconds", 0.0),
                      stored.get("backend", BACKEND))
    for key in ("devices", "device_properties", "machine", "date",
                "live_note"):
        if key in stored:
            result[key] = stored[key]
    return result


def assemble(effects, raw, errors, info, ref_of, seconds=0.0,
             backend=BACKEND):
    """The result object that ``--json`` writes, from measured numbers."""
    rows = evaluate_effects(effects, raw, errors, ref_of)
    return {
        "backend": backend, "devices": device_names(),
        "device_properties": device_properties(), "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"),
        "seconds": round(seconds, 1),
        "live_note": live_note(backend),
        "reference": info, "factor": FACTOR, "band": BAND,
        "sizes": SIZES, "gpu_sizes": GPU_SIZES, "effects": rows,
        "raw": raw, "errors": errors,
        "summary": summarize(rows),
    }


def live_note(backend):
    """What this run's values are."""
    if backend == "gpu":
        return ("this run is on a GPU: its values are this GPU's own, at "
                "the same sizes as the model's run; pass its --json as "
                "--reference to compare the model with it size for size")
    return ("this run is on the CPU device model, at the GPU lessons' sizes "
            "where the model can afford them (each row says its size)")
