"""Recording: the equivalent mutants' labels, each mutant's result, the
score, and the report in `benchmarks/mutation.json`."""
import json
import sys

OUT = "benchmarks/mutation.json"
EQUIVALENT = "tools/mutation-equivalent.json"
MAX_SHOWN = 20           # selected tests listed for a killed mutant
MAX_EQUIVALENT = 0.10    # the largest share of the sample labelled


def load_equivalent(root, known, log):
    """``{mutant id: reason}`` from `EQUIVALENT`; a label whose id is not
    among ``known`` (its line moved or changed) is reported as stale."""
    path = root / EQUIVALENT
    equivalent = json.loads(path.read_text()) if path.exists() else {}
    equivalent = {k: v for k, v in equivalent.items()
                  if not k.startswith("_")}
    for k in sorted(set(equivalent) - known):
        log(f"stale label in {EQUIVALENT} (no such site now): {k}")
    return equivalent


def result(m, tests, how, outcome, seconds, limit, note, equivalent):
    """One mutant's entry in the report."""
    # a survivor ran every selected test; a killed mutant stopped at the
    # first failure (named in `note`): its list is cut short
    shown = tests if outcome == "survived" else tests[:MAX_SHOWN]
    res = dict(id=m.id, file=m.file, line=m.line, col=m.col, kind=m.kind,
               original=m.original, mutated=m.mutated, outcome=outcome,
               selection=how, tests_selected=len(tests), tests=shown,
               seconds=round(seconds, 1), limit_s=round(limit), note=note)
    if outcome == "survived" and m.id in equivalent:
        res["equivalent"] = equivalent[m.id]
    return res


def score(results, equivalent):
    """Killed (timeouts included) plus survivors labelled equivalent with
    a reason, over the sample."""
    killed = sum(r["outcome"] in ("killed", "timeout") for r in results)
    labelled = [r for r in results if r["outcome"] == "survived"
                and equivalent.get(r["id"], "").strip()]
    return {"sampled": len(results), "killed": killed,
            "survived": sum(r["outcome"] == "survived" for r in results),
            "errors": sum(r["outcome"] == "error" for r in results),
            "equivalent": len(labelled),
            "score": (killed + len(labelled)) / len(results) if results
            else None,
            "equivalent_share": len(labelled) / len(results) if results
            else None}



def write_report(path, args, n_sites, results, equivalent, total, t_map,
                 log):
    """Write the report to ``path`` and log the score and the survivors;
    1 (the run fails) when more than `MAX_EQUIVALENT` of the sample is
    labelled equivalent, else 0."""
    s = score(results, equivalent)
    report = {"seed": args.seed, "n": args.n, "sites": n_sites,
              "sample": [r["id"] for r in results], **s,
              "seconds": round(total, 1), "map_seconds": round(t_map, 1),
              "python": sys.version.split()[0], "mutants": results}
    path.write_text(json.dumps(report, indent=1) + "\n")
    log(f"\nscore {s['killed']} killed + {s['equivalent']} equivalent "
        f"(labelled) of {s['sampled']}: "
        f"{100 * (s['score'] or 0):.1f}%  ({s['survived']} survived, "
        f"{s['errors']} errors; equivalent "
        f"{100 * (s['equivalent_share'] or 0):.1f}% of the sample, "
        f"at most 10%)")
    for r in results:
        if r["outcome"] == "survived":
            why = r.get("equivalent", "NOT LABELLED")
            log(f"  survived {r['id']}  {r['original']!r} -> "
                f"{r['mutated']!r}: {why}")
    log(f"{total / 60:.1f} min in all ({t_map / 60:.1f} min for the map); "
        f"results in {args.out}")
    if s["equivalent_share"] and s["equivalent_share"] > MAX_EQUIVALENT:
        log("more than 10% of the sample is labelled equivalent")
        return 1
    return 0
