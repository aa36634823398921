"""The command line, ``python -m src.reference`` from ``book/``: capture,
import, status, mark-stale, move, default and run-info (see
`src.reference`)."""
import argparse
import json
import sys
from pathlib import Path

from .machine import RefusedError, run_info
from .store import (
    CURRENT, NOT_CAPTURED, STALE, STATES, _entries, _read_lesson, _text,
    current_fingerprints, default_device, figure_stale, fingerprint, load,
    reference_devices, report, sources)
from .devices import set_default_device
from .writer import (
    _shown_path, capture, import_notebooks, mark_stale, move_lesson)


def print_status(device=None, out=None, book=None, root=None):
    """The ``status`` command: with ``device``, that reference alone;
    without, every value as the lessons show it, from the reference
    devices in order (`print_sources`)."""
    out = out or sys.stdout
    if device is None:
        return print_sources(out, book, root)
    default = default_device(root)
    reference = load(device, root)
    info = reference.get("device", {})
    print(f"the book's reference device (default): {default}", file=out)
    print(f"reference {device}: {info.get('name', '?')}, captured "
          f"{reference.get('date', 'never')}, commit "
          f"{reference.get('commit', '-')}", file=out)
    for lesson, states in report(device, book, root).items():
        counts = ", ".join(f"{len(states[s])} {s}" for s in STATES)
        print(f"{lesson:<18} {counts}", file=out)
        for state in (STALE, NOT_CAPTURED):
            if states[state]:
                print(f"  {state}: {', '.join(sorted(states[state]))}",
                      file=out)
        _print_marks(reference, lesson, book, out)


def _print_marks(reference, lesson, book, out, prefix=""):
    """A lesson's stale marks, keys no longer glued and figures, in one
    reference."""
    part = reference.get("lessons", {}).get(lesson, {})
    marked = {}
    for key, entry in sorted(_entries(reference, lesson).items()):
        if entry.get("stale"):
            marked.setdefault(entry["stale"], []).append(key)
    for fig in part.get("figures", []):
        if fig.get("stale"):
            marked.setdefault(fig["stale"], []).append(
                f"figure {fig.get('name')}")
    for why, names in marked.items():
        print(f"  {prefix}marked stale ({why}): {', '.join(names)}",
              file=out)
    gone = sorted(set(_entries(reference, lesson))
                  - set(current_fingerprints(
                      lesson, book, _entries(reference, lesson))))
    if gone:
        print(f"  {prefix}in the reference, no longer glued: "
              f"{', '.join(gone)}", file=out)
    figs = part.get("figures", [])
    if figs:
        now = {fingerprint(_text(c["source"])) for c in
               (_read_lesson(lesson, book) or {"cells": []})["cells"]
               if c["cell_type"] == "code"}
        stale = [f["file"] for f in figs if figure_stale(f, now)]
        print(f"  {prefix}figures: {len(figs) - len(stale)} current, "
              f"{len(stale)} stale", file=out)


def print_sources(out=None, book=None, root=None):
    """Per lesson (the misuse catalogue too): how many values are current,
    stale, not captured and excluded as the lessons show them, how many
    each reference device supplies, and which are stale (with the device
    they come from) or not captured; then, with more than one device,
    each device's own counts. Returns the totals, ``{state: n}``."""
    out = out or sys.stdout
    devices = reference_devices(root)
    refs = {d: load(d, root) for d in devices}
    print("the book's reference devices, in order (each value from the "
          "first whose run of it is current, else the first stale one):",
          file=out)
    for slug in devices:
        info = refs[slug].get("device", {})
        print(f"  {slug}: {info.get('name', 'no reference stored')}, "
              f"captured {refs[slug].get('date', 'never')}, commit "
              f"{refs[slug].get('commit', '-')}", file=out)
    totals = {s: 0 for s in STATES}
    by_device = {d: 0 for d in devices}
    own = {d: report(d, book, root) for d in devices}
    for lesson, found in sources(book, root).items():
        states = {s: sorted(k for k, (st, _) in found.items() if st == s)
                  for s in STATES}
        supply = {d: sum(1 for st, slug in found.values()
                         if slug == d and st in (CURRENT, STALE))
                  for d in devices}
        for s in STATES:
            totals[s] += len(states[s])
        for d in devices:
            by_device[d] += supply[d]
        shares = ", ".join(f"{d} {n}" for d, n in supply.items() if n)
        print(f"{lesson:<18} " + ", ".join(
            f"{len(states[s])} {s}" for s in STATES)
            + (f" (from {shares})" if shares else ""), file=out)
        if states[STALE]:
            print("  stale: " + ", ".join(
                f"{k} ({found[k][1]})" for k in states[STALE]), file=out)
        if states[NOT_CAPTURED]:
            print(f"  not captured: {', '.join(states[NOT_CAPTURED])}",
                  file=out)
        for slug in devices:
            mine = own[slug][lesson]
            if len(devices) > 1:
                print(f"  on {slug}: " + ", ".join(
                    f"{len(mine[s])} {s}" for s in (CURRENT, STALE,
                                                    NOT_CAPTURED)), file=out)
            _print_marks(refs[slug], lesson, book, out,
                         f"{slug}: " if len(devices) > 1 else "")
    print("total: " + ", ".join(f"{n} {s}" for s, n in totals.items())
          + " (from " + ", ".join(f"{d} {n}" for d, n in by_device.items())
          + ")", file=out)
    return totals


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m src.reference",
        description="Write and check the book's reference runs "
                    "(book/reference/<device>.json). Run from book/.")
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="run the lessons on this GPU and "
                         "store what they glued and drew")
    cap.add_argument("--device", help="slug of the reference file "
                     "(default: from the device's name, e.g. nvidia-h200)")
    cap.add_argument("--lessons", nargs="+", metavar="LESSON",
                     help="only these lessons (e.g. 05_1_queues); the "
                     "others keep their part of the reference")
    cap.add_argument("--allow-model", action="store_true",
                     help="capture on the CPU device model (for trying the "
                     "tool; a reference is a real GPU's)")
    cap.add_argument("--allow-errors", action="store_true",
                     help="store lessons with unexpected errors")
    cap.add_argument("--save", metavar="DIR",
                     help="also write the executed notebooks into DIR")
    cap.add_argument("--timeout", type=int, default=600,
                     help="seconds a cell may run (default 600)")
    imp = sub.add_parser("import", help="store lessons executed elsewhere "
                         "(e.g. ../.gpu/out/nb/*.ipynb)")
    imp.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    imp.add_argument("--device", help="slug of the reference file (default: "
                     "from the device's name in run.json or the lessons' "
                     "banner)")
    imp.add_argument("--commit", help="commit the lessons ran from "
                     "(default: run.json's, else this checkout's)")
    imp.add_argument("--date", help="date of the run (default: run.json's, "
                     "else today)")
    imp.add_argument("--run-info", metavar="JSON",
                     help="the run's device, date and commit, as `run-info` "
                     "writes them (default: run.json beside the "
                     "notebooks, if any)")
    imp.add_argument("--source", help="where the notebooks come from, as "
                     "the reference records it (default: their folder)")
    imp.add_argument("--allow-model", action="store_true",
                     help="import lessons run on the CPU device model")
    imp.add_argument("--allow-errors", action="store_true",
                     help="import lessons with unexpected errors")
    imp.add_argument("--replace", action="store_true",
                     help="drop the lessons not given from the reference")
    st = sub.add_parser("status", help="per lesson: current, stale, not "
                        "captured and excluded values")
    st.add_argument("--device", help="slug of the reference to check "
                    "(default: the book's, see `default`)")
    mark = sub.add_parser("mark-stale", help="mark glued values or figures "
                          "of a reference stale, with the reason: code "
                          "their cell calls has changed what they measure")
    mark.add_argument("lesson", metavar="LESSON", help="e.g. 02_2_chunks")
    mark.add_argument("names", metavar="NAME", nargs="+",
                      help="a glued key, or a figure's name")
    mark.add_argument("--why", required=True, help="the reason, shown by "
                      "`status`, e.g. 'measured with the one-block "
                      "harmonic_energy, replaced since'")
    mark.add_argument("--device", help="slug of the reference (default: "
                      "the book's)")
    mv = sub.add_parser("move", help="give a lesson's part of every "
                        "reference, its figures and its exclusions to the "
                        "lessons it was split into (or renamed to): each "
                        "key to the lesson that glues it now")
    mv.add_argument("lesson", metavar="LESSON", help="e.g. 05_streams, "
                    "as the references name it")
    mv.add_argument("into", metavar="NEW", nargs="+",
                    help="the lessons of the book that replace it, e.g. "
                    "05_1_queues 05_2_overlap 05_3_pipeline")
    mv.add_argument("--rest", metavar="NEW", help="the lesson that gets "
                    "what no NEW glues or draws now (default: the first)")
    dft = sub.add_parser("default", help="make SLUG (book/reference/"
                         "SLUG.json) the reference the lessons show; "
                         "execute them again after")
    dft.add_argument("slug", metavar="SLUG", nargs="?",
                     help="e.g. nvidia-h200 (without it: print the "
                     "default)")
    sub.add_parser("run-info", help="this machine's device and software, "
                   "the date and the commit, as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "capture":
            path = capture(args.lessons, args.device, args.allow_model,
                           args.allow_errors, args.save, args.timeout)
        elif args.command == "import":
            path = import_notebooks(
                args.notebooks, args.device, args.commit, args.date,
                args.run_info, args.allow_model, args.allow_errors,
                args.replace, source=args.source)
        elif args.command == "mark-stale":
            try:
                path = mark_stale(args.lesson, args.names, args.why,
                                  args.device)
            except ValueError as e:
                print(f"refused: {e}", file=sys.stderr)
                return 2
            print(f"marked stale in {_shown_path(path)}: "
                  f"{', '.join(args.names)}; execute {args.lesson} again "
                  "to show it")
            return 0
        elif args.command == "move":
            try:
                written = move_lesson(args.lesson, args.into, args.rest)
            except ValueError as e:
                print(f"refused: {e}", file=sys.stderr)
                return 2
            for path in written:
                print(f"wrote {_shown_path(path)}")
            print_status()
            return 0
        elif args.command == "default":
            if args.slug is None:
                print(default_device())
                return 0
            try:
                set_default_device(args.slug)
            except ValueError as e:
                print(f"refused: {e}", file=sys.stderr)
                return 2
            print(f"the book's reference device is now {args.slug}: "
                  "execute the lessons again to show it "
                  "(from the project root: python tools/execute.py)")
            return 0
        elif args.command == "status":
            try:
                print_status(args.device)
            except BrokenPipeError:     # `... status | head`
                sys.stderr.close()
            return 0
        else:
            print(json.dumps(run_info(), indent=1, sort_keys=True))
            return 0
    except RefusedError as e:
        print(f"refused: {e}", file=sys.stderr)
        return 2
    print(f"wrote {_shown_path(path)}")
    slug = Path(path).stem
    print_status(slug)
    if slug in reference_devices():
        print(f"{slug} is one of the book's reference devices: "
              "`python -m src.reference status` shows what the lessons "
              "show")
    else:
        print(f"{slug} is not one of the book's reference devices "
              f"({', '.join(reference_devices())}): `python -m "
              f"src.reference default {slug}` puts it first")
    return 0
