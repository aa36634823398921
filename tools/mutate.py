"""Mutation testing of `book/src`: a small, reproducible sampler.

    python tools/mutate.py --seed 1 --n 60          # the sampled run
    python tools/mutate.py --list                   # every mutation site
    python tools/mutate.py --n 8 --seed 1 --dry-run # the sample, no runs

Seeds one small fault ("mutant") into `book/src` at a time and runs the
tests that could notice it; a mutant the tests do not notice *survived*,
and points at code the tests do not really check. Kinds of fault, the
classic ones: a comparison flipped (`<`/`<=`, `>`/`>=`, `==`/`!=`,
`is`/`is not`, `in`/`not in`), arithmetic swapped (`+`/`-`, `*`/`/`, also
augmented), a number changed (0 to 1, 1 to 0, n to n + 1), `and`/`or`
swapped, `True`/`False` swapped, a `not` removed, `return x` made
`return None`. Text only a reader sees is not mutated: f-strings, the
arguments of `raise`, `assert` messages, `if __name__ == "__main__"`
blocks, and lines marked `# pragma: no mutate`.

Why not mutmut. mutmut 3 (tried: 3.8.1) cannot drive this suite. It
refuses our package outright: its trampoline asserts that no mutated module
is named `src.*` ("Module name starts with `src.`, which is invalid"),
because it takes `src/` for a source-layout folder, and the lessons import
the helpers as the package `src`. Renaming the package is not an option
(every lesson imports it). Beyond that, mutmut records which tests reach a
function from inside the pytest process, so it cannot see code that only a
notebook kernel (nbval) or a test's `python` subprocess runs, and it forks
the pytest process per mutant, which is unsafe with the CPU model's worker
threads alive. So this tool is a sampler of our own.

How it runs. Everything happens in a scratch copy of the checkout (the
files git tracks or would track), never in the working tree:

1. A *coverage map*, built once per content of `book/src`, `tests/` and
   the lessons (cached in `.mutation/`): the whole suite runs once under
   coverage.py, started in every Python process through coverage's
   `COVERAGE_PROCESS_START` hook, so pytest itself, the Jupyter kernels
   nbval starts and the tests' `python` subprocesses are all measured. A
   pytest plugin (`mutatekit.plugin`) names the context of each line
   after the test that ran it; a kernel or subprocess inherits the test id
   through the environment. Each lesson counts as one test (its cells share
   one kernel). The map also keeps each test's duration and outcome.
2. For each sampled mutant, the tests to run are those that executed its
   line, fastest first (tests that failed in the map's run are left out).
   Lines run while a module is imported (module constants, class
   attributes, default arguments, decorators) ran in the pytest process
   while it collected, in no test; for them the tests that run the lines
   using the defined name (or the function's body, for its defaults) are
   added. A function's body run at import (a helper that builds module
   constants, a profile loaded at import) may be used by any test of its
   module without being run in it: its module's test files and lessons
   are added (for the CPU model, the whole suite). A line that no process
   ran (no test, no lesson) cannot change any test's outcome: its mutant
   counts as survived at once, "not run by any test or lesson"
   (`--uncovered run` runs its module's test files and lessons anyway,
   those of a module re-exporting its names too, for a doubt about the
   map; minutes each).
3. The mutated file is written into the copy; pytest runs the selected
   tests with `-x` (stop at the first failure) and `-p no:cacheprovider`,
   with no bytecode written, under a time limit of 3 times the tests'
   measured time plus 60 s (`--timeout-factor`, `--timeout-floor`), at
   most `--cap` seconds, and pytest-timeout's limit on each test of 3
   times its own time, at least 30 s (`--test-timeout`). Failing tests:
   *killed*, once the first failing test, run alone on the original code,
   passes there (a test that fails under load or out of its file's order
   proves nothing; the mutant is then run again, and marked *error* if
   that happens twice). A time-out counts as killed (the mutant hangs
   something), and so does a test module that no longer imports (pytest
   then finds none of the tests named in it). All passed: *survived*.

Results go to `benchmarks/mutation.json` (`--out`): the seed, the sample,
each mutant's id (`file:line:col:kind`, stable while the line is), kind,
original and mutated text, outcome, tests run and seconds; and the score.
Equivalent mutants (no test could kill them: the program means the same)
are listed in `tools/mutation-equivalent.json` as `{id: one-line reason}`;
a surviving mutant counts as killed only with a recorded reason, and the
run reports how many are labelled (at most 10% of the sample).

A tool to run by hand, not part of CI. Measured on the 2-core machine,
shared with other jobs: the map 6 to 11 minutes (the suite under coverage,
rebuilt only when `book/src`, `tests/` or a lesson changed); a killed
mutant 3 to 9 seconds plus a few to confirm; a survivor as long as every
test of its line (17 seconds to 10 minutes); a hang up to 3 times the
longest selected test. A sample of 60: about 20 to 35 minutes in all.

The parts are the package `tools/mutatekit/` (sampling, the coverage map,
selection, running, recording); this script is the command line.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the package's names, those the tests call among them (tests/test_mutate.py)
from mutatekit import ROOT, SRC  # noqa: E402
from mutatekit.coverage_map import (  # noqa: E402
    CACHE, _content_hash, load_map, make_copy)
from mutatekit.plugin import _test_of  # noqa: E402, F401
from mutatekit.record import (  # noqa: E402, F401
    OUT, load_equivalent, result, score, write_report)
from mutatekit.running import (  # noqa: E402, F401
    _failed, _outcome, run_mutant)
from mutatekit.selection import (  # noqa: E402, F401
    _import_time, _module_names, _reexporters, relevant_suite, select)
from mutatekit.sites import (  # noqa: E402, F401
    Mutant, all_sites, apply, sample, sites)

DEFAULT_N = 60


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--n", type=int, default=DEFAULT_N)
    p.add_argument("--only", nargs="*", default=[],
                   help="mutant ids to run instead of a sample")
    p.add_argument("--out", default=OUT)
    p.add_argument("--list", action="store_true", help="print every site")
    p.add_argument("--dry-run", action="store_true",
                   help="print the sample (and, with a map, the tests)")
    p.add_argument("--rebuild-map", action="store_true")
    p.add_argument("--cap", type=float, default=600,
                   help="most seconds for one mutant")
    p.add_argument("--timeout-factor", type=float, default=3.0)
    p.add_argument("--timeout-floor", type=float, default=60.0)
    p.add_argument("--test-timeout", type=float, default=30.0,
                   help="least seconds for one test before it counts as "
                   "hanging (pytest-timeout); else 3 times its time")
    p.add_argument("--uncovered", choices=["skip", "run"], default="skip",
                   help="a line no test or lesson runs: count it survived "
                   "(skip) or run its module's relevant suite anyway")
    p.add_argument("--python", default=sys.executable)
    args = p.parse_args(argv)

    def log(msg):
        print(msg, flush=True)

    everything = all_sites(ROOT)
    if args.list:
        for m in everything:
            print(f"{m.id}\t{m.original!r} -> {m.mutated!r}")
        print(f"{len(everything)} sites")
        return 0
    if args.only:
        chosen = [m for m in everything if m.id in set(args.only)]
        missing = set(args.only) - {m.id for m in chosen}
        if missing:
            p.error(f"no such mutant: {', '.join(sorted(missing))}")
    else:
        chosen = sample(everything, args.n, args.seed)
    log(f"{len(everything)} sites in {SRC}; sample of {len(chosen)} "
        f"(seed {args.seed})")
    if args.dry_run:
        path = ROOT / CACHE / f"map-{_content_hash(ROOT)}.json"
        cmap = json.loads(path.read_text()) if path.exists() else None
        if cmap is None:
            log("(no current coverage map: tests not shown)")
        for m in chosen:
            tests, how = (select(ROOT, m, cmap, args.uncovered) if cmap
                          else ([], ""))
            print(f"{m.id}\t{m.original!r} -> {m.mutated!r}"
                  + (f"\t{len(tests)} tests ({how})" if cmap else ""))
        return 0
    equivalent = load_equivalent(ROOT, {m.id for m in everything}, log)
    results = []
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        copy = Path(tmp)
        make_copy(ROOT, copy)
        cmap = load_map(ROOT, copy, args.python, log, args.rebuild_map)
        t_map = time.monotonic() - t_start
        for i, m in enumerate(chosen, 1):
            tests, how = select(ROOT, m, cmap, args.uncovered)
            outcome, seconds, limit, note = run_mutant(
                copy, args.python, m, tests, cmap, args, log)
            results.append(result(m, tests, how, outcome, seconds, limit,
                                  note, equivalent))
            log(f"[{i}/{len(chosen)}] {outcome:8s} {seconds:6.1f} s  "
                f"{m.id}  {m.original!r} -> {m.mutated!r}  "
                f"({len(tests)} tests, {how})")
    return write_report(ROOT / args.out, args, len(everything), results,
                        equivalent, time.monotonic() - t_start, t_map, log)


if __name__ == "__main__":
    sys.exit(main())
