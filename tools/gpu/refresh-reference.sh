#!/usr/bin/env bash
# After a GPU run (`bash .gpu/run.sh` or `bash .gpu/run.sh lessons`), from
# the project root, on the GPU machine or wherever $OUT was copied:
#     bash tools/gpu/refresh-reference.sh [--device SLUG] [--commit C] ...
# ($OUT may also be the .tgz that run.sh packs it into with PACK=...)
# stores the lessons in $OUT/nb (default .gpu/out/nb), with the device,
# date and commit in $OUT/run.json, as their device's reference:
# book/reference/<slug>.json and its figures in book/reference/<slug>/.
# Other options: python -m src.reference import --help (from book/). Also
# copies $OUT/fidelity-gpu.json, if there, to
# benchmarks/fidelity-gpu-<slug>.json, the slug of the device that ran it
# (run.json's device, as the import names it; --device SLUG if given),
# one file a device: never over another device's file, never a run on the
# CPU device model. The lessons show the references listed in
# book/reference/devices, in order: `python -m src.reference default SLUG`
# (from book/) puts a device first once its capture is complete.
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
# reference the model's fidelity table is best compared with (same sizes),
# kept as that device's.
if [ -f "$OUT/fidelity-gpu.json" ]; then
  dest=$("$python" "$root/tools/gpu/fidelity_dest.py" "$OUT" \
    "$root/benchmarks" "$@") || exit 1
  cp "$OUT/fidelity-gpu.json" "$dest"
  rel=${dest#"$root"/}
  echo "copied fidelity-gpu.json to $rel; compare the model with it:"
  echo "  python benchmarks/fidelity.py --reference $rel \\"
  echo "      --json benchmarks/fidelity-cpu.json --markdown book/fidelity.md"
  echo "(the default when the model's profile is that device's), and the"
  echo "model's profile with one solved from that run:"
  echo "  python benchmarks/calibrate.py $rel"
fi
echo "the lessons show the references in book/reference/devices, in order:"
sed 's/^/  /' "$root/book/reference/devices"
echo "to put a device first: (cd book && python -m src.reference default SLUG),"
echo "then execute the lessons again: python tools/execute.py"
