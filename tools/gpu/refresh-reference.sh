#!/usr/bin/env bash
# After a GPU run (`bash .gpu/run.sh` or `bash .gpu/run.sh lessons`), from
# the project root, on the GPU machine or wherever $OUT was copied:
#     bash tools/gpu/refresh-reference.sh [--device SLUG] [--commit C] ...
# ($OUT may also be the .tgz that run.sh packs it into with PACK=...)
# stores the lessons in $OUT/nb (default .gpu/out/nb), with the device,
# date and commit in $OUT/run.json, as their device's reference:
# book/reference/<slug>.json and its figures in book/reference/<slug>/.
# Other options: python -m src.reference import --help (from book/). Also
# copies $OUT/fidelity-gpu.json, if there, to benchmarks/. The lessons keep
# showing the reference named in book/reference/default-device until
# `python -m src.reference default SLUG` (from book/) names another.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-.gpu/out}
case $OUT in /*) ;; *) OUT="$root/$OUT" ;; esac
# OUT may be the one file a lent device returned (run.sh with PACK=...).
case $OUT in *.tgz|*.tar.gz)
  [ -f "$OUT" ] || { echo "no such file: $OUT"; exit 1; }
  unpacked=$(mktemp -d); trap 'rm -rf "$unpacked"' EXIT
  tar -C "$unpacked" -xzf "$OUT"; OUT=$unpacked ;;
esac
python=${PYTHON:-python3}
[ -z "${PYTHON:-}" ] && [ -x "$root/.venv/bin/python" ] && python="$root/.venv/bin/python"
[ -d /tmp/gpu-site ] && export PYTHONPATH=/tmp/gpu-site${PYTHONPATH:+:$PYTHONPATH}
shopt -s nullglob
notebooks=("$OUT"/nb/*.ipynb)
[ ${#notebooks[@]} -gt 0 ] || { echo "no lessons in $OUT/nb: run bash .gpu/run.sh lessons first"; exit 1; }
cd "$root/book"
"$python" -m src.reference import "${notebooks[@]}" "$@"
# fidelity.py's own run on the GPU (bash .gpu/run.sh fidelity), if any: the
# reference the model's fidelity table is best compared with (same sizes).
if [ -f "$OUT/fidelity-gpu.json" ]; then
  cp "$OUT/fidelity-gpu.json" "$root/benchmarks/fidelity-gpu.json"
  echo "copied fidelity-gpu.json to benchmarks/; compare the model with it:"
  echo "  python benchmarks/fidelity.py --reference benchmarks/fidelity-gpu.json \\"
  echo "      --json benchmarks/fidelity-cpu.json --markdown book/fidelity.md"
  echo "and the model's profile with one solved from that run:"
  echo "  python benchmarks/calibrate.py benchmarks/fidelity-gpu.json"
fi
default=$("$python" -m src.reference default)
echo "the lessons show the reference in book/reference/default-device ($default);"
echo "to show another one: (cd book && python -m src.reference default SLUG),"
echo "then execute the lessons again: python tools/execute.py"
