"""CuPy's routine accelerators on the model: which reductions CuPy 14 sends
to CUB (``CUPY_ACCELERATORS``), and the workspace CUB takes from the pool
for them, so that the pool's numbers show it as on a GPU."""
import os

import numpy
from numpy.lib.array_utils import normalize_axis_tuple

from .cuda import runtime


def _accelerators(text):
    """CuPy's routine accelerators from ``CUPY_ACCELERATORS`` (a comma-
    separated list; cupy/_core/_accelerator.pyx), read once at import, as
    CuPy reads it: ``cub`` when the variable is unset, none when it is
    empty; an unknown name raises ValueError, as it fails CuPy's import."""
    names = [b for b in text.split(",") if b]
    for b in names:
        if b not in ("cub", "cutensor", "cutensornet"):
            raise ValueError(f"Unknown accelerator: {b}")
    return names


ACCELERATORS = _accelerators(os.environ.get("CUPY_ACCELERATORS", "cub"))

# CUB's reductions as CuPy 14 calls them (cupy/cuda/cub.pyx): `sum`,
# `prod`, `max`, `min`, `argmax`, `argmin` (and `mean`, a sum then a
# divide) of a C- or F-contiguous array
# go to cub::DeviceReduce when they reduce every axis, and (but for the arg
# ones) to cub::DeviceSegmentedReduce when they reduce the contiguous axes
# (the last ones in C order, the first in F order); only for these dtypes
# (CUB's sum does not promote, so a sum with dtype None takes only the
# dtypes NumPy sums in their own type).
_CUB_OPS = {numpy.sum, numpy.prod, numpy.max, numpy.min, numpy.argmax,
            numpy.argmin}
_CUB_DTYPES = frozenset(numpy.dtype(c) for c in "bBhHiIlLefdFD")
_CUB_SUM_DTYPES = frozenset(numpy.dtype(c) for c in "lLefdFD")


def _cub_workspace(func, a, axis, dtype):
    """Bytes of workspace that CuPy allocates from the pool for this
    reduction when it goes to CUB (None: it does not). CuPy asks CUB for
    the size and allocates it before the launch, and frees it after (it is
    alive beside the result): 1 byte when CUB needs no scratch (CUB
    reports 1, never 0), which the pool rounds up to a 512-byte block.

    * segmented (an axis reduction): 1 byte;
    * whole array: 1 byte when the array fits one tile of CUB's reduce
      policy (256 threads of up to 16 items, 16 four-byte items each
      scaled by the accumulator's size: 4,096 float32, 2,048 float64),
      else one accumulator per block of its grid (8 blocks of 256 threads
      per multiprocessor, times CUB's subscription factor 5), aligned to
      256 bytes, plus 255 for the alignment.
    The sizes are read from CUB's dispatch (cub/device/dispatch/
    dispatch_reduce.cuh) and NVIDIA's tuning, not measured; a GPU's run
    confirms them (benchmarks/README.md)."""
    if "cub" not in ACCELERATORS:
        return None
    if func is numpy.mean:          # CuPy's mean is CUB's sum, then a divide
        if a.size == 0:
            return None
        if dtype is None and a.dtype.char not in "dD":
            dtype = (numpy.float64 if a.dtype.kind in "iub" else
                     numpy.float32 if a.dtype.char == "e" else None)
        elif dtype is not None and numpy.dtype(dtype).kind in "iub":
            dtype = numpy.float64
        func = numpy.sum
    if func not in _CUB_OPS:
        return None
    src = a._a
    if not (src.flags.c_contiguous or src.flags.f_contiguous) or \
            a.size > 0x7FFFFFFF:
        return None
    if dtype is None and func in (numpy.sum, numpy.prod):
        supported = _CUB_SUM_DTYPES
    elif dtype is None or numpy.dtype(dtype) == a.dtype:
        supported = _CUB_DTYPES
    else:
        return None
    if a.dtype not in supported:
        return None
    axes = tuple(range(a.ndim)) if axis is None else tuple(sorted(
        normalize_axis_tuple(axis, a.ndim)))
    if len(axes) < a.ndim:                      # DeviceSegmentedReduce
        if func in (numpy.argmax, numpy.argmin) or a.size == 0 or not axes:
            return None
        together = axes == tuple(range(axes[0], axes[0] + len(axes)))
        inner = (axes[-1] == a.ndim - 1 if src.flags.c_contiguous
                 else axes[0] == 0)
        return 1 if together and inner else None
    if func in (numpy.argmax, numpy.argmin):    # a key-value pair
        accum = (2 * a.dtype.alignment if a.dtype.kind == "c"
                 else max(4, a.dtype.alignment)) + a.dtype.itemsize
    else:
        accum = a.dtype.itemsize
    tile = 256 * max(1, min(16, 64 // accum))
    if a.size <= tile:
        return 1
    props = runtime.getDeviceProperties(runtime.getDevice())
    blocks = props["maxThreadsPerMultiProcessor"] // 256 \
        * props["multiProcessorCount"] * 5
    return -(-blocks * accum // 256) * 256 + 255
