"""Comparing with the reference: an effect's formulas, its verdict, and the
GPU reference its live value is set beside."""
import ast
import json
import math
from pathlib import Path

from src import BACKEND, device_names
from src import reference as refs

from .effect import DEVICE_ONLY, MIXED
from .sizes import sizes_of

FACTOR = 2.0        # device-only: agrees within this factor of the reference
BAND = 1.3          # mixed: "about 1" within this factor of 1
AGREES, DIFFERS, FLAGGED = "agrees", "differs", "flagged"
NO_REFERENCE, NOT_MEASURED = "no reference", "not measured"
BENCHMARKS = Path(__file__).resolve().parents[1]


def gpu_run_path(slug):
    """Where a GPU's own run of fidelity.py is kept, one file a device
    (tools/gpu/refresh-reference.sh copies it there)."""
    return BENCHMARKS / f"fidelity-gpu-{slug}.json"


def run_device(backend=BACKEND):
    """The slug of the GPU whose reference this run is compared with: the
    GPU it runs on, or, on the CPU device model, the GPU its profile was
    measured on (`comparator_device`: the H100's, whatever the order of
    the book's reference devices)."""
    if backend == "gpu":
        return refs.device_slug(device_names()[0])
    return refs.comparator_device()


def default_reference(slug=None):
    """The same device's reference (``slug``, default `run_device`): its
    own run of fidelity.py, at these sizes (`gpu_run_path`), where there
    is one, else the values its lessons glued
    (``book/reference/<slug>.json``), which may not exist either."""
    slug = slug or run_device()
    run = gpu_run_path(slug)
    return run if run.is_file() else refs.reference_path(slug)


def names_in(expression):
    """The variable names an expression reads (not the functions it calls)."""
    tree = ast.parse(expression, mode="eval")
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and id(n) not in called}


def evaluate(expression, values):
    """``expression`` over ``values`` (names to numbers), as a float."""
    missing = names_in(expression) - set(values)
    if missing:
        raise KeyError(f"{expression!r} needs {sorted(missing)}")
    return float(eval(compile(expression, "<formula>", "eval"),
                      {"__builtins__": {}, "max": max, "min": min},
                      dict(values)))


def usable(x):
    return x is not None and math.isfinite(x) and x > 0


def direction(ratio, band=BAND):
    """``"above 1"``, ``"below 1"`` or ``"about 1"`` (within ``band``)."""
    if ratio > band:
        return "above 1"
    if ratio < 1 / band:
        return "below 1"
    return "about 1"


def verdict(cls, live, ref, factor=FACTOR, band=BAND, gain=False):
    """`AGREES`, `DIFFERS` (device-only, beyond ``factor``), `FLAGGED`
    (mixed, pointing elsewhere), `NO_REFERENCE` or `NOT_MEASURED`.

    With ``gain``, a device-only speedup is judged by its gain, the ratio
    less 1, on either side of 1 (a ratio below 1, a time over a shorter
    one, by its inverse's): a factor of 2 on a speedup of 1.2 itself
    would pass a model that shows no speedup at all. A reference inside
    ``band`` of 1 is "about 1": the live value agrees when it is about 1
    too (a factor is never applied to a gain near zero)."""
    if not usable(ref):
        return NO_REFERENCE
    if not usable(live):
        return NOT_MEASURED
    if cls == DEVICE_ONLY:
        if gain:
            if direction(ref, band) == "about 1":
                return AGREES if direction(live, band) == "about 1" \
                    else DIFFERS
            if ref < 1:
                live, ref = 1 / live, 1 / ref
            live, ref = live - 1, ref - 1
            if live <= 0:
                return DIFFERS
        return AGREES if 1 / factor <= live / ref <= factor else DIFFERS
    if cls == MIXED:
        return AGREES if direction(live, band) == direction(ref, band) \
            else FLAGGED
    raise ValueError(f"unknown class {cls!r}")


# -- the reference ------------------------------------------------------------
def _shown(path):
    """``path`` as the book's commands write it: from the project's root
    when it is inside it."""
    try:
        return str(path.resolve().relative_to(BENCHMARKS.parent))
    except ValueError:
        return str(path)


def load_reference(path=None):
    """``(info, ref_of)``: a description of the reference at ``path``
    (default: `default_reference`), and a function giving an `Effect`'s
    reference ``(value, state)``; where there is no such file, every
    effect's is ``(None, "not captured")``."""
    path = Path(path or default_reference())
    shown = _shown(path)
    if not path.is_file():
        info = {"path": shown, "kind": "none", "device": path.stem,
                "note": f"none: no {path.name} here, so nothing to compare "
                        "with on this device"}
        return info, lambda effect: (None, refs.NOT_CAPTURED)
    data = json.loads(path.read_text())
    if "effects" in data:                   # a fidelity.py run on a GPU
        name = (data.get("devices") or ["a GPU"])[0]
        info = {"path": shown, "kind": "fidelity", "device": name,
                "date": data.get("date"),
                "note": f"measured by fidelity.py itself on {name}, at the "
                        "same sizes as this run"}

        def ref_of(effect):
            entry = data["effects"].get(effect.key, {})
            value = entry.get("live")
            return value, ("measured" if usable(value) else "not captured")
        return info, ref_of

    lessons = data.get("lessons", {})
    name = data.get("device", {}).get("name", path.stem)
    info = {"path": shown, "kind": "lessons", "device": name,
            "date": data.get("date"), "commit": data.get("commit"),
            "note": f"{name}, the lessons' glued values, taken at the "
                    "lessons' GPU sizes (until a GPU runs fidelity.py "
                    "itself)"}
    now = {}

    def ref_of(effect):
        values, states = {}, set()
        for full in effect.refs:
            lesson, key = full.split("/", 1)
            entry = lessons.get(lesson, {}).get("values", {}).get(key)
            if lesson not in now:
                now[lesson] = refs.current_fingerprints(lesson)
            states.add(refs.status_of(entry, now[lesson].get(key)))
            if entry is not None:
                values[key] = entry["value"]
        if len(values) < len(effect.refs):
            return None, refs.NOT_CAPTURED
        state = refs.STALE if refs.STALE in states else refs.CURRENT
        return evaluate(effect.formula, values), state
    return info, ref_of


def evaluate_effects(effects, raw, errors, ref_of):
    rows = {}
    for e in effects:
        ref, state = ref_of(e)
        live = None
        if e.experiment in raw:
            try:
                live = evaluate(e.live, raw[e.experiment])
            except ZeroDivisionError:
                live = math.inf
        v = verdict(e.cls, live, ref, gain=e.gain)
        here, gpu, why = sizes_of(e.sizes)
        rows[e.key] = {
            "title": e.title, "class": e.cls, "lesson": e.lesson,
            "live": live, "reference": ref, "reference_state": state,
            "verdict": v, "reason": e.reason if v == FLAGGED else "",
            "judged_on": "gain (ratio - 1)" if e.gain else "ratio",
            "live_formula": f"{e.experiment}: {e.live}",
            "reference_keys": list(e.refs),
            "reference_formula": e.formula,
            "size": here, "reference_size": gpu,
            "same_size": not why, "size_note": why,
        }
        if e.experiment in errors:
            rows[e.key]["error"] = errors[e.experiment]
    return rows


def no_gain(r):
    """Whether ``r`` is a gain the model did not make where the GPU made
    one (a speedup of at most 1, or a ratio below 1 of at least 1): it
    misses against any GPU, whatever the reference says. A reference
    about 1 asks for no gain."""
    if r.get("judged_on", "ratio") == "ratio" or r.get("live") is None:
        return False
    ref = r.get("reference")
    if ref is not None and direction(ref) == "about 1":
        return False
    if ref is not None and ref < 1:
        return r["live"] >= 1
    return r["live"] <= 1


def summarize(rows):
    dev = [r for r in rows.values() if r["class"] == DEVICE_ONLY]
    mix = [r for r in rows.values() if r["class"] == MIXED]
    agree = sum(r["verdict"] == AGREES for r in dev)
    flagged = sum(r["verdict"] == FLAGGED for r in mix)
    mixed_ok = sum(r["verdict"] == AGREES for r in mix)
    # a reference whose lesson cell changed since the GPU ran it measured
    # other code: a miss against it says nothing until a GPU re-measures,
    # unless the model made no gain, which misses against any GPU
    misses = {k: r for k, r in rows.items()
              if r["class"] == DEVICE_ONLY and r["verdict"] != AGREES}
    stale_misses = sorted(k for k, r in misses.items()
                          if r.get("reference_state") == refs.STALE
                          and not no_gain(r))
    return {
        "device_only": len(dev), "device_only_within_factor": agree,
        "device_only_misses_on_stale_references": stale_misses,
        "device_only_no_gain": sorted(k for k, r in misses.items()
                                      if no_gain(r)),
        "mixed": len(mix), "mixed_agree": mixed_ok,
        "mixed_flagged": flagged,
        # issue 17's "must show": every device-only effect within the
        # factor, every mixed one agreeing or flagged, at most a quarter
        # of the mixed ones flagged
        "must_show_met": (agree == len(dev) and mixed_ok + flagged
                          == len(mix) and flagged <= len(mix) / 4),
    }
