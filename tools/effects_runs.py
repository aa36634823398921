"""Execute the lessons that hold the registry's effects N times on the CPU
device model, and record each effect's value in every run.

    python tools/effects_runs.py [LESSON ...] [-n N] [--out PATH]

LESSON: a lesson's name or path, as ``tools/execute.py`` takes it
(default: every lesson with an effect in ``benchmarks/lessoneffects.py``
that is tested against a number). Each run executes the lesson top to
bottom in a fresh kernel, as ``tools/execute.py`` does, but writes
nothing back to the notebook: it reads the values the run glued, judges
each effect on them (``lessoneffects.check``) and records it.

The record (``benchmarks/lesson-effects-runs.json`` by default) keeps,
for each lesson, every run: when it ran, how long it took, the machine's
load average before it (an idle 2-core machine reads well under 1), and
each effect's value and verdict; and for each effect its values in run
order, its GPU value and margin, and ``consecutive``: how many runs in a
row, from the first, it held; and the commit its runs were made at (the
record's own ``commit`` is the latest run's). Lessons not run this time
keep their earlier record. The claim it backs: each registered effect points the
GPU's way in 5 consecutive runs on an idle machine (``-n 5``).
"""
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
OUT = ROOT / "benchmarks" / "lesson-effects-runs.json"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tools"))
import lessoneffects as effects  # noqa: E402
from execute import lesson_path, lessons_parser  # noqa: E402


def run_lesson(path, timeout):
    """One fresh execution of lesson ``path``: ``{key: value}`` glued,
    and the unexpected errors."""
    from src.reference import writer
    nb = writer.execute(path, timeout)
    return effects.lesson_values(nb), writer.unexpected_errors(nb)


def record_run(lesson, values, errors, seconds, load):
    out = {"date": datetime.datetime.now(datetime.timezone.utc)
           .isoformat(timespec="seconds"),
           "seconds": round(seconds, 1), "load_before": load,
           "errors": errors, "effects": {}}
    for effect in effects.EFFECTS:
        if effect.lesson == lesson:
            value, verdict = effects.check(effect, values)
            out["effects"][effect.key] = {"value": value,
                                          "verdict": verdict}
    return out


def summary(lesson, runs):
    """Per effect of ``lesson``: its values in run order, and how many
    runs in a row, from the first, it held."""
    out = {}
    for effect in effects.EFFECTS:
        if effect.lesson != lesson:
            continue
        seen = [r["effects"][effect.key] for r in runs]
        judged = effect in effects.tested()
        held = 0
        for s in seen:
            if s["verdict"] != "holds":
                break
            held += 1
        out[effect.key] = {
            "title": effect.title, "formula": effect.formula,
            "gpu": effect.gpu, "margin": effect.margin,
            "source": None if effect.awaiting else effect.source,
            "awaiting": effect.awaiting or None,
            "model_cannot": effect.model_cannot or None,
            "values": [s["value"] for s in seen],
            "consecutive": held if judged else None}
    return out


def commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                              cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None):
    parser = lessons_parser(__doc__)
    parser.add_argument("-n", type=int, default=5,
                        help="runs of each lesson (default 5)")
    parser.add_argument("--out", default=str(OUT),
                        help="the record to write (default %(default)s)")
    args = parser.parse_args(argv)
    os.environ.setdefault("BOOK_BACKEND", "cpu")
    sys.path.insert(0, str(BOOK))
    paths = [lesson_path(p) for p in args.lessons] or [
        BOOK / f"{name}.ipynb" for name in effects.lessons(effects.tested())]
    out = Path(args.out)
    record = json.loads(out.read_text()) if out.exists() else {}
    record.update(backend=os.environ["BOOK_BACKEND"], commit=commit(),
                  machine={"cores": len(os.sched_getaffinity(0)),
                           "python": platform.python_version(),
                           "platform": platform.platform()})
    lessons = record.setdefault("lessons", {})
    failed = False
    for path in paths:
        lesson = path.stem
        runs = []
        for i in range(args.n):
            load = round(os.getloadavg()[0], 2)
            t = time.time()
            values, errors = run_lesson(path, args.timeout)
            runs.append(record_run(lesson, values, errors, time.time() - t,
                                   load))
            verdicts = ", ".join(f"{k} {v['verdict']}" for k, v in
                                 runs[-1]["effects"].items()
                                 if v["verdict"] not in (
                                     effects.AWAITING, effects.MODEL_CANNOT))
            print(f"{lesson} run {i + 1}/{args.n} "
                  f"({runs[-1]['seconds']:.0f} s, load {load}): {verdicts}"
                  + (f"; errors {errors}" if errors else ""))
        lessons[lesson] = {"n": args.n, "commit": record["commit"],
                           "runs": runs,
                           "effects": summary(lesson, runs)}
        failed = failed or any(
            s["consecutive"] is not None and s["consecutive"] < args.n
            for s in lessons[lesson]["effects"].values())
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written: {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
