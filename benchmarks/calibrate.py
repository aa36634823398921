"""Calibrate the CPU device model's profile from a GPU's run of fidelity.py.

    python benchmarks/calibrate.py benchmarks/fidelity-gpu-nvidia-h200.json \\
        --out book/src/cpudevice/profiles/h200.json

A device profile (`src.cpudevice._profile`) holds what the model's cost
model needs: bandwidths, rates, per-item costs, the host's cost to issue a
call. This tool solves for each entry that one of fidelity.py's
experiments isolates: the value with which the profile's own cost model
(`Profile.copy_cost`, `kernel_cost`, `stage_cost`, `issue_s`) predicts what
the GPU measured, with the entries solved before it in place. Nothing is
fitted to an effect: each entry is read off one measurement of one
operation, at the size the run used (its ``sizes``), and the effects are
then compared by fidelity.py as before.

Entries no experiment isolates keep the base profile's values (``--base``,
the default profile) and are listed as kept: the launch and copy
latencies, a graph's launch, a module's load, the book's loop kernels.
So are the host's issue costs when the run was on the CPU device model,
where they time the model's own Python, not CuPy's. (fidelity.py's
``copy_duplex`` measures whether the link carries both directions at full
rate at once, which the model assumes; `main` prints it.) The device's
properties come from the run (``device_properties``), for the keys the
base profile lists.

From the model's own fidelity run (``benchmarks/fidelity-cpu.json``) it
gives back the profile the model ran with, to within the model's host
noise: that is the test that the descriptions below match the experiments
(`tests/test_calibrate.py`).
"""
import argparse
import copy
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))
from src.cpudevice._profile import DEFAULT_PROFILE, Profile  # noqa: E402
from src.reference.lesson import short_name  # noqa: E402


def _sum(cost):
    """Seconds of a ``(latency, work)`` cost."""
    return cost[0] + cost[1]


class Entry:
    """One profile entry solved from one measurement.

    ``path``: where the entry sits in the profile's JSON; ``measured``:
    ``run -> seconds`` the GPU took; ``predict``: ``(profile, sizes) ->
    seconds`` the cost model gives for the same operations; ``what``: the
    measurement in words (for the profile's notes); ``host``: True for the
    host's costs, which a run on the CPU device model cannot give.
    """

    def __init__(self, path, measured, predict, what, host=False):
        self.path, self.measured, self.predict = path, measured, predict
        self.what, self.host = what, host


def _bytes_f32(n):
    return 4 * n


def _issue_cost(kind, key, call):
    """The entry for ``host/issue_us/<kind>``: the host's time per
    ``call``, read straight off fidelity.py's ``issue_costs[key]``."""
    return Entry(("host", "issue_us", kind),
                 lambda r, s: r["issue_costs"][key],
                 lambda p, s: p.issue_s(kind),
                 f"issue_costs: the host's time per {call}, fastest round "
                 "of many, from an idle device", host=True)


ENTRIES = [
    Entry(("copy", "h2d_pinned_gbps"),
          lambda r, s: s["bw_large"] / (r["bandwidth"]["large_pin_gbps"]
                                        * 1e9),
          lambda p, s: _sum(p.copy_cost(s["bw_large"], "H2D")),
          "bandwidth: an H2D copy of bw_large bytes from pinned memory, "
          "events around it"),
    Entry(("copy", "d2h_pinned_gbps"),
          lambda r, s: r["overlap_demo"]["seq_copies_ms"] * 1e-3,
          lambda p, s: sum(_sum(p.copy_cost(
              _bytes_f32(s["chunk"] * s["n_streams"]), d))
              for d in ("H2D", "D2H")),
          "overlap_demo: the sequential version's copy in and copy out "
          "of chunk x n_streams float32, on its timeline"),
    Entry(("kernel", "memory_gbps"),
          lambda r, s: r["copy_and_add"]["add_s"],
          lambda p, s: _sum(p.kernel_cost(nbytes=2 * _bytes_f32(s["carry"]))),
          "copy_and_add: x + x on carry float32 (reads x once, writes the "
          "result), events around it"),
    Entry(("kernel", "flops_tflops"),
          lambda r, s: r["queue_print"]["device_s"],
          lambda p, s: _sum(p.kernel_cost(
              nbytes=3 * 8 * s["dot_n"] ** 2, flops=2 * s["dot_n"] ** 3))
          + _sum(p.kernel_cost(nbytes=8 * s["dot_n"] ** 2 + 8)),
          "queue_print: dot(x, x).sum() on dot_n x dot_n float64 "
          "(2 n^3 operations, then a reduction), events around it"),
    Entry(("kernels", "overlap_kernel", "ns_per_item"),
          lambda r, s: r["overlap_demo"]["seq_kernel_ms"] * 1e-3,
          lambda p, s: p.kernel_cost(
              nbytes=_bytes_f32(s["chunk"] * s["n_streams"]),
              items=s["chunk"] * s["n_streams"], name="overlap_kernel")[1],
          "overlap_demo: the sequential version's one kernel over chunk x "
          "n_streams float32, from its first block's start to its last "
          "block's end (%globaltimer stamps: no launch latency)"),
    Entry(("host", "pageable_stage_gbps"),
          lambda r, s: r["two_by_two"]["blk_pageable_nb_s"],
          lambda p, s: p.stage_cost(_bytes_f32(s["batch_m"])),
          "two_by_two: how long x.set(pageable, blocking=False) of "
          "batch_m float32 held the host (the driver stages it)"),
    Entry(("host", "context_create_ms"),
          lambda r, s: r["first_use"]["first_s"] - r["first_use"]["later_s"],
          lambda p, s: p.context_create_s,
          "first_use: a fresh process's first small operation less a later "
          "one (host clock)"),
    _issue_cost("event", "event_record_s", "Event.record on a stream"),
    _issue_cost("call", "view_s", "view x[1:] of 1,000 float32, a call "
                "that queues no work"),
    _issue_cost("reduction", "reduction_s", "x.sum() of 1,000 float32, a "
                "reduction's launch"),
    Entry(("host", "issue_us", "launch"),
          lambda r, s: r["loops"]["eager_s"],
          lambda p, s: p.issue_s("launch") + p.issue_s("call"),
          "loops: one eager step of x + x on small float32, host-bound "
          "(a launch and the loop's own Python, a call)", host=True),
    Entry(("host", "issue_us", "copy"),
          lambda r, s: s["bw_small"] / (r["bandwidth"]["small_pin_gbps"]
                                        * 1e9),
          lambda p, s: p.issue_s("copy") + _sum(p.copy_cost(s["bw_small"],
                                                            "H2D")),
          "bandwidth: events around an H2D copy of bw_small bytes, which "
          "the copy's issue sets", host=True),
]

def _get(data, path):
    for key in path:
        data = data[key]
    return data


def _set(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def solve(data, entry, target, sizes):
    """The value of ``entry`` with which profile ``data`` predicts
    ``target`` seconds: bisection on a log scale (every prediction is
    monotonic in its entry), to a part in a million."""
    base = float(_get(data, entry.path)) or 1.0

    def predicted(value):
        trial = copy.deepcopy(data)
        _set(trial, entry.path, value)
        return entry.predict(Profile(trial), sizes)

    lo, hi = base / 1e4, base * 1e4
    rising = predicted(hi) > predicted(lo)
    if not (min(predicted(lo), predicted(hi)) <= target
            <= max(predicted(lo), predicted(hi))):
        raise ValueError(f"{'/'.join(entry.path)}: no value within 10^4 of "
                         f"the base's {base:g} predicts {target:.4g} s")
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if (predicted(mid) < target) == rising:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-6:
            break
    return float(f"{math.sqrt(lo * hi):.4g}")


def _name(device):
    """``"NVIDIA H200"`` -> ``"H200"``: the profile's short name."""
    return short_name(device).replace("NVIDIA ", "") or device


def calibrate(run, base=None, source="fidelity run"):
    """A new profile (a dict) from ``run`` (fidelity.py's JSON, a dict)
    and the ``base`` profile's dict (default: the model's default)."""
    if base is None:
        base = json.loads(Path(DEFAULT_PROFILE).read_text())
    data = copy.deepcopy(base)
    sizes, raw = run["sizes"], run["raw"]
    on_gpu = run.get("backend") == "gpu"
    solved, kept = {}, {}
    for entry in ENTRIES:
        key = "/".join(entry.path)
        if entry.host and not on_gpu:
            kept[key] = ("a run on the CPU device model times its own "
                         "Python, not CuPy's host")
            continue
        try:
            target = entry.measured(raw, sizes)
        except (KeyError, TypeError, ZeroDivisionError):
            kept[key] = "the run did not measure it"
            continue
        value = solve(data, entry, target, sizes)
        _set(data, entry.path, value)
        solved[key] = {"value": value, "measured_s": target,
                       "from": entry.what}
    for path in _unsolved(base, solved):
        kept.setdefault(path, "no experiment of fidelity.py isolates it")
    props = run.get("device_properties") or {}
    device = props.get("name") or (run.get("devices") or ["?"])[0]
    data["name"], data["device"] = _name(device), device
    taken = sorted(k for k in data.get("properties", {}) if k in props)
    for key in taken:
        data["properties"][key] = props[key]
    data["source"] = (
        f"calibrated by benchmarks/calibrate.py from {source} "
        f"(fidelity.py with BOOK_BACKEND={run.get('backend')} on {device}, "
        f"{run.get('date', 'date not recorded')}): the entries under "
        "'calibration' solved from its measurements, the rest kept from "
        f"the base profile ({base.get('name')}: see its notes)")
    data["calibration"] = {"solved": solved, "kept": kept,
                           "properties_from_run": taken}
    return data


def _unsolved(base, solved):
    """Numeric entries of ``base``'s cost sections that nothing solved."""
    out = []
    for section in ("host", "kernel", "copy", "kernels"):
        stack = [((section,), base.get(section, {}))]
        while stack:
            path, node = stack.pop()
            for key, value in node.items():
                if isinstance(value, dict):
                    stack.append((path + (key,), value))
                elif isinstance(value, (int, float)) and not isinstance(
                        value, bool) and key != "per":   # an argument's name
                    name = "/".join(path + (key,))
                    if name not in solved:
                        out.append(name)
    return sorted(out)


def compare(new, old):
    """Rows ``(entry, old value, new value, new / old)`` of the solved
    entries."""
    rows = []
    for key, record in new["calibration"]["solved"].items():
        before = _get(old, tuple(key.split("/")))
        rows.append((key, before, record["value"],
                     record["value"] / before if before else math.nan))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0].strip())
    parser.add_argument("run", help="fidelity.py's --json of a GPU run")
    parser.add_argument("--base", default=DEFAULT_PROFILE,
                        help="the profile whose other entries are kept")
    parser.add_argument("--out", help="write the new profile here "
                        "(default: only print the comparison)")
    args = parser.parse_args(argv)
    run = json.loads(Path(args.run).read_text())
    base = json.loads(Path(args.base).read_text())
    new = calibrate(run, base, source=Path(args.run).name)
    print(f"{'entry':36} {'base':>12} {'calibrated':>12} {'ratio':>7}")
    for key, before, after, ratio in compare(new, base):
        print(f"{key:36} {before:12.4g} {after:12.4g} {ratio:7.3f}")
    for key, why in sorted(new["calibration"]["kept"].items()):
        print(f"kept {key}: {why}")
    d = run["raw"].get("copy_duplex", {})
    if d.get("both_s"):
        print(f"measured, not modelled: H2D and D2H copies alone over both "
              f"at once {(d['h2d_s'] + d['d2h_s']) / d['both_s']:.2f} (2: a "
              f"full-duplex link, which the model assumes; 1: turns)")
    if args.out:
        Path(args.out).write_text(json.dumps(new, indent=2) + "\n")
        Profile.load(args.out)              # it loads as a profile
        print(f"wrote {args.out}; use it with BOOK_CPU_PROFILE={args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
