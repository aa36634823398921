#!/usr/bin/env bash
# On a GPU machine, from the project root: the whole book on real CuPy.
#     bash .gpu/run.sh [tests|lessons|bench|all]     (default: all)
# (tools/gpu/prepare.sh puts this script and the wheels it needs in .gpu/.)
# Writes under $OUT (default .gpu/out): pytest.log, bench.json, the lessons
# executed with their outputs in nb/, and run.json (the device, date and
# commit of the run). Then `bash tools/gpu/refresh-reference.sh` stores the
# lessons' numbers and figures as that device's reference. Exit status:
# pytest's, or 1 when a lesson raised an error it should not have.
set -u
what=${1:-all}
OUT=${OUT:-.gpu/out}
mkdir -p "$OUT/nb"
if ls .gpu/whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/gpu-site .gpu/whl/*.whl >/dev/null 2>&1 \
    || { echo "installing the wheels in .gpu/whl failed"; exit 1; }
  export PYTHONPATH=/tmp/gpu-site
else
  echo "no wheels in .gpu/whl (tools/gpu/prepare.sh): using the installed packages"
fi
export PYTHONUNBUFFERED=1 BOOK_BACKEND=gpu
nvidia-smi -L 2>/dev/null
python3 -c "import sys, cupy, numpy; print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__, 'CUDA runtime', cupy.cuda.runtime.runtimeGetVersion(), 'driver', cupy.cuda.runtime.driverGetVersion())"
rc=0
if [ "$what" = all ] || [ "$what" = tests ]; then
  t=$(date +%s)
  timeout "${TESTS_TIMEOUT:-600}" python3 -m pytest -q -p no:cacheprovider -rfE > "$OUT/pytest.log" 2>&1
  rc=$?
  echo "pytest exit $rc in $(( $(date +%s) - t )) s: $(grep -E '(passed|failed)' "$OUT/pytest.log" | tail -1)"
  grep -E '^(FAILED|ERROR)' "$OUT/pytest.log" | head -40
fi
if [ "$what" = all ] || [ "$what" = lessons ]; then
  out_abs=$(cd "$OUT" && pwd)
  (cd book && python3 -m src.reference run-info > "$out_abs/run.json") \
    || echo "run-info failed: $OUT/run.json not written"
  for nb in book/0*.ipynb; do
    t=$(date +%s)
    (cd book && timeout 300 python3 - "$(basename "$nb")" "$out_abs" <<'PY'
import os, sys
import nbformat
from nbclient import NotebookClient
# Not src.reference's helpers: importing src here would open CUDA in this
# process too, beside the kernel's.
name, out = sys.argv[1], sys.argv[2]
nb = nbformat.read(name, as_version=4)
client = NotebookClient(nb, timeout=240, kernel_name="python3",
                        allow_errors=True, resources={"metadata": {"path": "."}})
try:
    client.execute()
finally:
    nbformat.write(nb, os.path.join(out, "nb", name))
errors = [(i, o.get("ename"), o.get("evalue", "")[:200])
          for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
          for o in cell.get("outputs", []) if o.get("output_type") == "error"
          and "raises-exception" not in cell.metadata.get("tags", [])]
print(name, "unexpected errors:", errors or "none")
sys.exit(1 if errors else 0)
PY
    ) 2>&1 | grep -v IPKernelApp
    [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    echo "  $nb in $(( $(date +%s) - t )) s"
  done
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  timeout 300 python3 benchmarks/run.py --json "$OUT/bench.json" \
    --only $(python3 -c "import json,subprocess,sys; print(' '.join(k for k in json.load(open('benchmarks/latest-cpu.json'))['units'] if not k.endswith('_s')))" 2>/dev/null) 2>&1 | tail -20
fi
exit $rc
