"""The command line, ``python -m src.reference`` from ``book/``: capture,
import, status, mark-stale, move, default and run-info (see
`src.reference`)."""
import argparse
import json
import sys
from pathlib import Path

from .machine import RefusedError, run_info
from .store import (
    NOT_CAPTURED, STALE, STATES, _entries, _read_lesson, _text,
    current_fingerprints, default_device, figure_stale, fingerprint, load,
    report, set_default_device)
from .writer import (
    _shown_path, capture, import_notebooks, mark_stale, move_lesson)


def print_status(device=None, out=None, book=None, root=None):
    """The ``status`` command."""
    out = out or sys.stdout
    default = default_device(root)
    device = device or default
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
            print(f"  marked stale ({why}): {', '.join(names)}", file=out)
        gone = sorted(set(_entries(reference, lesson))
                      - set(current_fingerprints(
                          lesson, book, _entries(reference, lesson))))
        if gone:
            print(f"  in the reference, no longer glued: {', '.join(gone)}",
                  file=out)
        figs = part.get("figures", [])
        if figs:
            now = {fingerprint(_text(c["source"])) for c in
                   (_read_lesson(lesson, book) or {"cells": []})["cells"]
                   if c["cell_type"] == "code"}
            stale = [f["file"] for f in figs if figure_stale(f, now)]
            print(f"  figures: {len(figs) - len(stale)} current, "
                  f"{len(stale)} stale", file=out)


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
    print_status(Path(path).stem)
    return 0
