#!/usr/bin/env bash
# Prepare a checkout of the book for a run on a GPU machine that has CUDA,
# CuPy, NumPy, matplotlib, pytest and Python 3.12 but no package index.
# Run from anywhere in the checkout, on a machine that reaches the index:
#     bash tools/gpu/prepare.sh
# It fills .gpu/ (ignored by git) with the notebook stack's wheels and a
# copy of run.sh; copy the checkout with its .gpu/ to the GPU machine and
# run there, from the project root: bash .gpu/run.sh
# PYVER (default 3.12) picks the GPU machine's Python.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
PYVER=${PYVER:-3.12}
mkdir -p .gpu/whl
cp tools/gpu/run.sh .gpu/run.sh
chmod +x .gpu/run.sh
# x86-64 Linux wheels for the GPU machine's Python. The rest of the book's
# requirements (CuPy, NumPy, matplotlib, pytest, hypothesis, psutil,
# pytest-timeout) are expected to be there already. pytest-xdist is here
# because pytest.ini names its -n (the lane's tests run with -n 0).
python3 -m pip download -q --no-deps --only-binary=:all: \
  --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 --platform any -d .gpu/whl \
  nbval==0.11.0 nbclient myst-nb==1.4.0 docutils==0.21.2 jupyter_client \
  jupyter_core nbformat fastjsonschema jsonschema jsonschema-specifications \
  referencing rpds-py ipykernel comm debugpy ipython ipython-pygments-lexers \
  matplotlib-inline nest_asyncio pyzmq tornado traitlets platformdirs \
  decorator jedi parso pexpect ptyprocess prompt_toolkit wcwidth stack_data \
  executing asttokens pure_eval nvidia-ml-py pytest-xdist execnet
echo "prepared: $(ls .gpu/whl | wc -l) wheels, $(du -sh .gpu | cut -f1) in .gpu/"
