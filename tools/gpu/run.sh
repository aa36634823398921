#!/usr/bin/env bash
# On a GPU machine, from the project root: the whole book on real CuPy.
#     bash .gpu/run.sh [STEP ...]      STEP: lessons fidelity tests bench all
# (default: lessons fidelity; all: the four. Steps run in that order
# whatever the order asked: the lessons and fidelity.py first, since they
# make the GPU reference and the model's calibration, and a run cut short
# by its budget should have them). tools/gpu/prepare.sh puts this script
# and the wheels it needs in .gpu/.
# The plan on a lent GPU (kind nvidia-h200): 15 minutes of device time in
# all, the machine's start (1-2 minutes) included, at most 10 minutes a
# command. First, in one call of at most 6 minutes, the lessons and
# fidelity.py, this script's default (they took 243 s on the H100;
# BUDGET_S defaults to 330 s), which leaves time to run that call again if
# it fails. Then, if time is left, `bash .gpu/run.sh tests bench` in a
# second call (92 s on the H100).
# It exports BOOK_LANE=1: a lesson then asks for no more of the device
# than the lent machine allows (02.3 keeps its managed memory within the
# free memory, and its oversubscribed case is not captured).
# Writes under $OUT (default .gpu/out): pytest.log, the lessons executed
# with their outputs in nb/, run.json (the device, date and commit of the
# run), fidelity-gpu.json (benchmarks/fidelity.py's effects measured on
# this GPU), bench.json and steps.log (each step's time). The lessons run
# once: the lessons step checks what nbval would (no unexpected error, the
# NBVAL_CHECK_OUTPUT cells' outputs as stored), and the tests step runs
# tests/ alone, not the lessons again. Then
# `bash tools/gpu/refresh-reference.sh` stores the lessons' numbers and
# figures as that device's reference, and keeps fidelity-gpu.json as
# benchmarks/fidelity-gpu-<device>.json.
# LESSONS (names without .ipynb, space-separated) runs only those lessons,
# for a capture of a few: refresh-reference.sh then updates only theirs.
# BUDGET_S (default 330) caps the whole run: each step's timeout is cut to
# what is left of it, so a run ends in time for the plan above (or a lent
# device's limit of 10 minutes a command), with what it finished kept.
# A step cut by its timeout is interrupted (SIGINT: pytest still prints
# its summary, a lesson keeps the cells it ran, fidelity.py writes what it
# measured), and killed 10 s later.
# PACK=FILE.tgz also packs all of $OUT into that one file at the end (a
# lent device returns at most 8 files, and a run writes more): there,
#     PACK="$OUT/gpu-out.tgz" OUT=/tmp/gpu-out bash .gpu/run.sh
# (PACK first: it must name the device's $OUT, before OUT changes), and
# refresh-reference.sh takes OUT=<where it came back>/gpu-out.tgz.
# Exit status: 0 when every step ran and passed; else pytest's, or 1 when
# a lesson raised an error it should not have or changed a checked
# output, fidelity.py or the benchmarks failed, or a step ran out of time.
set -u
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(lessons fidelity)
for s in "${steps[@]}"; do
  case $s in lessons|fidelity|tests|bench|all) ;;
    *) echo "unknown step '$s' (lessons, fidelity, tests, bench, all)"; exit 2 ;;
  esac
done
want() { local s; for s in "${steps[@]}"; do
  [ "$s" = all ] || [ "$s" = "$1" ] && return 0; done; return 1; }
OUT=${OUT:-.gpu/out}
mkdir -p "$OUT/nb"
if [ -n "${PACK:-}" ]; then
  pack_out() { local tmp; tmp=$(mktemp) && tar -C "$OUT" -czf "$tmp" . \
    && mkdir -p "$(dirname "$PACK")" && mv "$tmp" "$PACK" \
    && echo "packed $OUT into $PACK" || echo "packing $OUT into $PACK failed"; }
  trap pack_out EXIT
fi
deadline=$(( $(date +%s) + ${BUDGET_S:-330} ))
# left CAP: seconds a step may take, at most CAP and what the budget leaves
# (less 15 s to write up); 0 when nothing is left.
left() { local l=$(( deadline - $(date +%s) - 15 ))
  [ "$l" -lt 0 ] && l=0; [ "$l" -gt "$1" ] && l=$1; echo "$l"; }
# in_time STEP CAP: true when STEP has at least 20 s left (then $cap holds
# its timeout); else logs that it was skipped (`timeout 0` would mean none).
in_time() { cap=$(left "$2"); [ "$cap" -ge 20 ] && return 0
  echo "$1: skipped, out of time (BUDGET_S)" | tee -a "$OUT/steps.log"; rc=1
  return 1; }
# capped CAP CMD...: CMD interrupted after CAP s, killed 10 s later (124).
capped() { timeout -s INT -k 10 "$@"; }
: > "$OUT/steps.log"
step_done() { echo "$1: exit $2 in $(( $(date +%s) - $3 )) s" | tee -a "$OUT/steps.log"; }
if ls .gpu/whl/*.whl >/dev/null 2>&1; then
  # pip says why when it fails (a wheel for another Python, say)
  if ! pipsaid=$(python3 -m pip install -q --no-index --no-deps --no-compile \
      --no-cache-dir --upgrade --target /tmp/gpu-site .gpu/whl/*.whl 2>&1); then
    echo "installing the wheels in .gpu/whl failed:"; echo "$pipsaid"; exit 1
  fi
  export PYTHONPATH=/tmp/gpu-site
else
  echo "no wheels in .gpu/whl (tools/gpu/prepare.sh): using the installed packages"
fi
export PYTHONUNBUFFERED=1 BOOK_BACKEND=gpu BOOK_LANE=1
nvidia-smi -L 2>/dev/null
python3 -c "import sys, cupy, numpy; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__, 'CUDA runtime', cupy.cuda.runtime.runtimeGetVersion(), 'driver', cupy.cuda.runtime.driverGetVersion())"
rc=0
if want lessons; then
  t0=$(date +%s)
  out_abs=$(cd "$OUT" && pwd)
  (cd book && python3 -m src.reference run-info > "$out_abs/run.json") \
    || echo "run-info failed: $OUT/run.json not written"
  for nb in book/0*.ipynb book/misuse.ipynb; do
    # LESSONS="02_3_allocators ...": run only those (a targeted capture)
    if [ -n "${LESSONS:-}" ]; then
      case " $LESSONS " in *" $(basename "$nb" .ipynb) "*) ;; *) continue ;; esac
    fi
    t=$(date +%s)
    in_time "  $nb" 300 || continue
    (cd book && capped "$cap" python3 - "$(basename "$nb")" "$out_abs" <<'PY'
import copy, os, sys
import nbformat
from nbclient import NotebookClient
# Not src.reference's helpers: importing src here would open CUDA in this
# process too, beside the kernel's.
name, out = sys.argv[1], sys.argv[2]
nb = nbformat.read(name, as_version=4)
stored = copy.deepcopy(nb)
client = NotebookClient(nb, timeout=240, kernel_name="python3",
                        allow_errors=True, resources={"metadata": {"path": "."}})
try:
    client.execute()
finally:
    nbformat.write(nb, os.path.join(out, "nb", name))
sys.path.insert(0, os.path.join("..", "tests"))
from nbtexts import checked, texts     # after the lesson is saved: nbval
errors = [(i, o.get("ename"), o.get("evalue", "")[:200])
          for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
          for o in cell.get("outputs", []) if o.get("output_type") == "error"
          and "raises-exception" not in cell.metadata.get("tags", [])]
changed = [i for i, (ref, cell) in enumerate(zip(stored.cells, nb.cells))
           if checked(ref) and texts(cell.outputs) != texts(ref.outputs)]
print(name, "unexpected errors:", errors or "none",
      "| checked outputs changed in cells:", changed or "none")
sys.exit(1 if errors or changed else 0)
PY
    ) 2>&1 | grep -v IPKernelApp
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    echo "  $nb in $(( $(date +%s) - t )) s"
  done
  step_done lessons "$rc" "$t0"
fi
if want fidelity && in_time fidelity 300; then
  t=$(date +%s)
  capped "$cap" python3 benchmarks/fidelity.py \
    --json "$OUT/fidelity-gpu.json" > "$OUT/fidelity.log" 2>&1
  r=$?; [ $r = 0 ] || rc=1
  step_done fidelity $r "$t"
  tail -5 "$OUT/fidelity.log"
fi
if want tests && in_time tests "${TESTS_TIMEOUT:-400}"; then
  t=$(date +%s)
  capped "$cap" python3 -m pytest tests -q -n 0 -p no:cacheprovider -rfE \
    > "$OUT/pytest.log" 2>&1
  r=$?; [ $r = 0 ] || rc=$r
  step_done tests $r "$t"
  echo "pytest: $(grep -E '(passed|failed)' "$OUT/pytest.log" | tail -1)"
  grep -E '^(FAILED|ERROR)' "$OUT/pytest.log" | head -40
fi
if want bench && in_time bench 300; then
  t=$(date +%s)
  capped "$cap" python3 benchmarks/run.py --json "$OUT/bench.json" \
    --only $(python3 -c "import json,subprocess,sys; print(' '.join(k for k in json.load(open('benchmarks/latest-cpu.json'))['units'] if not k.endswith('_s')))" 2>/dev/null) 2>&1 | tail -20
  r=${PIPESTATUS[0]}; [ "$r" = 0 ] || rc=1
  step_done bench "$r" "$t"
fi
exit $rc
