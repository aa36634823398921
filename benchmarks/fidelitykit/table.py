"""The table writer: the effects as aligned text for the terminal, and as
the book page ``book/fidelity.md``."""
from src import reference as refs

from .calibration import ISSUE_CALLS
from .compare import (AGREES, BAND, DIFFERS, FACTOR, FLAGGED, no_gain,
                      summarize)
from .sizes import SMALLER, size_label


def fmt(x):
    if x is None:
        return "-"
    return refs.format_value(x)


def live_header(result):
    return "this model" if result["backend"] == "cpu" else "this GPU"


def size_cell(r):
    """The size an effect was measured at, and the reference's where it
    differs."""
    if r.get("same_size", True):
        return r.get("size", "-")
    return f"{r['size']} (GPU: {r['reference_size']})"


def table(result):
    """The effects as aligned text, for the terminal."""
    head = ["effect", "class", "size", live_header(result), "reference",
            "verdict"]
    lines = []
    for key, r in result["effects"].items():
        v = r["verdict"] + (f" ({r['reason']})" if r["reason"] else "")
        cls = r["class"] + (", gain" if r["judged_on"] != "ratio" else "")
        lines.append([key, cls, size_cell(r), fmt(r["live"]),
                      fmt(r["reference"]), v])
    n = len(head) - 1
    widths = [max(len(x[i]) for x in [head] + lines) for i in range(n)]
    out = ["  ".join(c.ljust(w) for c, w in zip(row[:n], widths))
           + "  " + row[n] for row in [head] + lines]
    s = result["summary"]
    out += ["", f"live: {result['live_note']}",
            f"reference: {result['reference']['note']}",
            f"device-only within {FACTOR:g}x: "
            f"{s['device_only_within_factor']} of {s['device_only']}; "
            f"mixed flagged: {s['mixed_flagged']} of {s['mixed']}; "
            f"must show met: {s['must_show_met']}"
            + (f" (misses against stale references: "
               f"{', '.join(s['device_only_misses_on_stale_references'])})"
               if s["device_only_misses_on_stale_references"] else "")]
    return "\n".join(out)


COMMAND = ("python benchmarks/fidelity.py --json benchmarks/fidelity-cpu.json "
           "--markdown book/fidelity.md")


def command(result):
    """`COMMAND`, with the ``--reference`` this result was compared with
    when it was a GPU's own run of fidelity.py (not the default)."""
    ref = result.get("reference", {})
    if ref.get("kind") == "fidelity" and ref.get("path"):
        return f"{COMMAND} --reference {ref['path']}"
    return COMMAND


ISSUE_ROWS = (("event_record_s", "an event's record on a stream",
               "event"),
              ("view_s", "a view, x[1:] (queues no work)", "call"),
              ("launch_s", "x + x on 1,000 float32 (a launch)", "launch"),
              ("reduction_s", "x.sum() on 1,000 float32 (a reduction's "
               "launch)", "reduction"))


def duplex(raw):
    """``(h2d + d2h) / both`` of `copy_duplex`: 2 for a full-duplex link,
    1 when the two directions take turns; None when not measured."""
    d = raw.get("copy_duplex")
    if not d or not d.get("both_s"):
        return None
    return (d["h2d_s"] + d["d2h_s"]) / d["both_s"]


def calibration_section(result):
    """Lines of the page on the experiments no effect reads: ``issue_costs``
    (the host's time per call in this run beside what the profile charges
    the model's device clock) and ``copy_duplex``."""
    lines = []
    ratio = duplex(result["raw"])
    if ratio is not None:
        d = result["raw"]["copy_duplex"]
        size = size_label("bw_large", result["sizes"]["bw_large"])
        lines += [
            "## Copies in both directions at once",
            "",
            f"An H2D copy of {size} "
            f"from pinned memory took {d['h2d_s'] * 1e3:.2f} ms alone, a D2H "
            f"copy of as many {d['d2h_s'] * 1e3:.2f} ms, and both at once on "
            f"two streams {d['both_s'] * 1e3:.2f} ms (events): the two alone "
            f"over both at once is {ratio:.2f}, where 2 is a link that "
            "carries both directions at full rate and 1 one whose "
            "directions take turns. The model gives each direction its own "
            "engine at the link's full rate, so it reads about 2; a GPU's "
            "run says what its link does.",
            "",
        ]
    costs = result["raw"].get("issue_costs")
    if not costs:
        return lines
    from src.cpudevice._profile import Profile
    profile = Profile.load()
    on_model = result["backend"] != "gpu"
    lines += [
        "## The host's cost to issue a call",
        "",
        "The host's time per call, the fastest of five rounds of "
        f"{ISSUE_CALLS:,} calls from an idle device, beside the issue time "
        f"the model's {profile.name} profile charges for the call's kind "
        "(`host.issue_us`). "
        + ("Here a bare `time.perf_counter` times them, so they are the "
           "model's own Python, which neither its device clock nor the "
           "book's host clocks count: both charge the profile's times "
           "instead (see "
           "the backends page, \"When the host issued it\"). On a GPU they "
           "are CuPy's, and `calibrate.py` solves the profile's event, call "
           "and reduction times from them."
           if on_model else
           "On this GPU they are CuPy's own, and `calibrate.py` solves the "
           "profile's event, call and reduction times from them."),
        "",
        f"| call | this run (µs) | {profile.name} profile (µs) |",
        "|---|---|---|",
    ]
    for key, what, kind in ISSUE_ROWS:
        if key in costs:
            lines.append(f"| {what} | {costs[key] * 1e6:.1f} | "
                         f"{profile.issue_s(kind) * 1e6:g} ({kind}) |")
    return lines + [""]


def _miss_reason(r):
    """Why a row that differs, with no declared reason, differs: a gain
    the model did not make (`no_gain`) misses against any GPU; otherwise a
    stale reference awaits a GPU run."""
    if r["verdict"] != DIFFERS:
        return ""
    if no_gain(r):
        return "the model gained nothing here (at most 1)"
    if r["reference_state"] == refs.STALE:
        return "stale reference: awaits a GPU run"
    return ""


def markdown(result):
    """The page ``book/fidelity.md``: the table and what it means."""
    s, info = result["summary"], result["reference"]
    ref_name = info["device"].replace("80GB HBM3", "").strip()
    live = live_header(result)
    lines = [
        "# Fidelity of the CPU device model", "",
        "<!-- Generated by benchmarks/fidelity.py; do not edit by hand. -->",
        "",
        "How closely does the CPU device model reproduce the effects the "
        "book teaches? `benchmarks/fidelity.py` measures "
        f"{len(result['effects'])} of them, each a ratio the lessons "
        "measure, the way the lessons measure them, and sets each beside "
        f"the reference GPU's: {info['note']}.",
        "",
        "Each effect has a class. A **device-only** effect is measured "
        "with CUDA events, or dominated by device time (copy against "
        "compute, pinned against pageable bandwidth, overlap on a "
        "timeline, fused against eager at a large size): it agrees when "
        f"it is within a factor of {FACTOR:g} of the GPU's, either way; "
        "for a speedup, the factor applies to its gain, the speedup less "
        "1 (a GPU's 1.5 asks for 1.25 to 2), since a factor of 2 on the "
        "speedup itself would pass a model that shows none; a ratio below "
        "1 is judged by its inverse's gain, and a GPU's ratio within a "
        f"factor of {BAND:g} of 1 gained nothing beyond noise, so it asks "
        "for one within that band too. A "
        "**mixed** effect sets host time against device time (queueing "
        "against printing, a graph against eager launches, first use in "
        "a fresh process, a host held by a copy): it agrees when it "
        f"points the GPU's way: both above {BAND:g}, both below "
        f"1/{BAND:g}, or both within a factor of {BAND:g} of 1 (a "
        "ratio inside that band points no way). On the model, host and "
        "device "
        "time lie on one modelled timeline: events read the device clock "
        "of a GPU profile, and the book's host clocks (`Benchmark`, "
        "`cpx.profiler.benchmark`'s `cpu_times`) read the host's view of "
        "that clock, on which each CuPy call costs CuPy's issue time and "
        "each wait lasts its modelled length (the backends page, \"One "
        "timeline\"). The host's own work is real on that timeline: Python "
        "and NumPy run at this machine's speed, and the model's real work "
        "runs on threads on the same cores. Where that real work competes "
        "with the host's own work, a mixed effect can point the other way; "
        "it is then *flagged*, with the reason.",
        "",
        "Each effect is measured here at the size the GPU lesson used, the "
        "size the reference was measured at, where the model can afford "
        "it, and otherwise at the largest size it can afford: the model "
        "does every operation's real work on the CPU, so an experiment's "
        "real work must fit in about ten seconds on 2 cores, and its "
        "arrays in the model's 1 GiB device. No size is chosen to make an "
        "effect agree. Where the sizes differ, the size column gives the "
        "GPU's too, and the notes below say why. Device-only effects are "
        "read on the device clock, as a GPU benchmark reads them: events "
        "recorded after a warm-up around work that is only queued, with "
        "no host wait between them (except inside a copy from pageable "
        "memory, which holds the host on a GPU too).",
        "",
        f"| effect | lesson | class | size | {live} | {ref_name} | "
        "agrees? | reason if flagged |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, r in result["effects"].items():
        ref = fmt(r["reference"])
        if r["reference_state"] == refs.STALE:
            ref += " (stale)"
        agrees = {AGREES: "yes", DIFFERS: "no", FLAGGED: "flagged"}.get(
            r["verdict"], r["verdict"])
        cls = r["class"] + (", gain" if r["judged_on"] != "ratio" else "")
        reason = r["reason"] or _miss_reason(r)
        lines.append(f"| {r['title']} | {r['lesson'][:2]} | {cls} "
                     f"| {size_cell(r)} | {fmt(r['live'])} | {ref} "
                     f"| {agrees} | {reason} |")
    # from the rows, so that a page re-rendered from a stored run follows
    # the rules of `summarize` as they are now
    now = summarize(result["effects"])
    on_stale = now["device_only_misses_on_stale_references"]
    gained_nothing = now["device_only_no_gain"]
    lines += [
        "",
        f"Device-only effects within a factor of {FACTOR:g}: "
        f"{s['device_only_within_factor']} of {s['device_only']}"
        + (f"; {len(on_stale)} of those that miss compare against a "
           "stale reference, one the GPU measured with code the book has "
           "since changed, and wait for a GPU to re-measure it"
           if on_stale else "")
        + (f"; {len(gained_nothing)} of them the model gained nothing in, "
           "which misses against any GPU" if gained_nothing else "")
        + f". Mixed effects pointing the GPU's way: {s['mixed_agree']} of "
        f"{s['mixed']}; flagged: {s['mixed_flagged']}.",
        "",
        f"Measured {result['date']} with `BOOK_BACKEND={result['backend']}`"
        f" on {result['machine']['cpus']} CPU cores, Python "
        f"{result['machine']['python']}, in {result['seconds']:g} s; "
        f"regenerate with `{command(result)}`. \"Stale\" marks a reference "
        "whose lesson cell, or code it calls, has changed since the GPU ran "
        "it.",
        "",
    ]
    notes = {}
    for r in result["effects"].values():
        if r.get("size_note"):
            notes.setdefault(r["size_note"], []).append(r["title"])
    if notes:
        lines += ["Sizes smaller than the GPU lesson's:", ""]
        lines += [f"* {'; '.join(f'*{t}*' for t in titles)}: "
                  f"{note.removeprefix(SMALLER)}."
                  for note, titles in notes.items()]
        lines.append("")
    lines += calibration_section(result)
    lines += [
        "## How each effect is computed",
        "",
        "Measured here: the experiment in `benchmarks/fidelity.py` and the "
        "ratio of its numbers. "
        + ("On the GPU: the same experiment, at the same size, in "
           "fidelity.py's own run there (the last column names the "
           "lesson's keys that measure the same ratio)."
           if info.get("kind") == "fidelity" else
           "On the GPU: the lesson's glued keys and the ratio taken of "
           "them."),
        "",
        "| effect | key | measured here | GPU reference |",
        "|---|---|---|---|",
    ]
    for key, r in result["effects"].items():
        keys = ", ".join(f"`{k}`" for k in r["reference_keys"])
        lines.append(f"| {r['title']} | `{key}` | `{r['live_formula']}` | "
                     f"{keys}: "
                     f"`{r['reference_formula']}` |")
    lines.append("")
    return "\n".join(lines)
