#!/usr/bin/env bash
# Prepare a checkout of the book for a run on a GPU machine that has CUDA,
# CuPy, NumPy, matplotlib, pytest and Python 3.12 but no package index
# (the lent kind, nvidia-h200: its packages in image-nvidia-h200.txt).
# Run from anywhere in the checkout, on a machine that reaches the index:
#     bash tools/gpu/prepare.sh
# It fills .gpu/ (ignored by git) with the notebook stack's wheels, pinned
# in tools/gpu/lane-wheels.txt with every dependency the image lacks, and a
# copy of run.sh; copy the checkout with its .gpu/ to the GPU machine and
# run there, from the project root: bash .gpu/run.sh
# PYVER (default 3.12) picks the GPU machine's Python. To check the wheels
# as the GPU machine will use them (a clean Python $PYVER, beside only the
# image's packages): python tools/gpu/check_prepared.py
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
PYVER=${PYVER:-3.12}
mkdir -p .gpu/whl
rm -f .gpu/whl/*.whl            # run.sh installs every wheel it finds here
cp tools/gpu/run.sh .gpu/run.sh
chmod +x .gpu/run.sh
# x86-64 Linux wheels for the GPU machine's Python, exactly the pinned
# versions and nothing else (--no-deps: lane-wheels.txt lists the
# dependencies itself). The rest of the book's requirements (CuPy, NumPy,
# matplotlib, pytest, hypothesis, psutil, pytest-timeout, pytest-xdist,
# nvidia-ml-py) are the image's.
python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --platform any -d .gpu/whl \
  -r tools/gpu/lane-wheels.txt
pinned=$(grep -cE '^[A-Za-z0-9]' tools/gpu/lane-wheels.txt)
packed=$(ls .gpu/whl/*.whl | wc -l)
[ "$packed" = "$pinned" ] || {
  echo "packed $packed wheels for the $pinned pins of tools/gpu/lane-wheels.txt"; exit 1; }
echo "prepared: $packed pinned wheels for Python $PYVER, $(du -sh .gpu | cut -f1) in .gpu/"
