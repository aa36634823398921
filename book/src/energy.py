"""The energy ``sum(k * (x - mu)**2 / 2)`` as a fused, two-stage reduction.

`harmonic_energy_kernel` (a `ReductionKernel`), `TwoStageEnergy`, which
spreads a whole-array reduction over the GPU in two stages, the
`harmonic_energy` the lessons call, and the kernel's NumPy twin. All of it
is imported from `src.kernels` too.
"""
import numpy as np

from . import cp, devices, twins
from .specs import Reduction, build


harmonic_energy_kernel = build(Reduction(
    "T x, T k, T mu", "float64 y",
    "k * (x - mu) * (x - mu) / 2", "a + b", "y = a", "0",
    "harmonic_energy", reduce_type="double"))


class TwoStageEnergy:
    """``sum(k * (x - mu)**2 / 2)`` over ``x``, in its dtype.

    CuPy's `ReductionKernel` gives each *output* value one thread block, so
    a whole-array reduction (one output) runs on a single block of one SM:
    on an H100 that was 48 times slower than the one-liner with temporaries.
    So the energy of a C-contiguous ``x`` is taken in two stages:

    1. the kernel reduces ``x[:m*L]`` seen as ``m`` rows of ``L`` values
       along its rows (``axis=1``): one block per row, ``m`` blocks to fill
       the GPU (the largest power of two up to ``rows_per_sm`` per
       multiprocessor), each row's partial sum accumulated and kept in
       double. A power of two because CuPy's reduction kernel finds each
       element's place from its flat index with a ``CIndexer``, which
       divides by the row count for every element read unless that count
       is a power of two (then a shift and a mask);
    2. ``cp.sum`` of the ``m`` partials, plus the same kernel over the tail
       ``x[m*L:]`` (fewer than ``m`` values), in double; the total is
       rounded once to x's dtype.

    Every term is still computed in registers, so the extra memory is the
    ``m`` partials (8 bytes each) and a few scalars, whatever the size of
    ``x``. Arrays shorter than ``2 * min_row`` values, non-contiguous
    arrays, and calls with ``axis`` reduce with the kernel in one stage.
    ``out`` (an array of x's dtype with the result's shape) receives the
    result; ``stream`` is the stream every stage runs on (default: the
    current stream), as for any CuPy kernel.
    """

    def __init__(self, kernel, rows_per_sm=16, min_row=4096):
        self.kernel = kernel
        self.name = kernel.name
        self.rows_per_sm = rows_per_sm
        self.min_row = min_row
        self.stages = [
            "stage 1: this kernel over x as m rows (axis=1), one block per "
            "row,",
            f"         m = a power of two, up to {rows_per_sm} per "
            "multiprocessor: m partials in double",
            "stage 2: cp.sum(partials) + this kernel over the tail, rounded "
            "once to T"]

    def rows(self, x):
        """How many rows stage 1 cuts ``x`` into (0: one stage)."""
        if not isinstance(x, cp.ndarray) or not x.flags.c_contiguous:
            return 0
        rows = min(self.rows_per_sm * devices.multiprocessors(),
                   x.size // self.min_row)
        return 1 << (rows.bit_length() - 1) if rows >= 2 else 0

    BLOCK = 512          # threads per block of CuPy's reductions (CUDA)

    def threads(self, x):
        """Threads stage 1 launches for ``x`` (one block per row), e.g. for
        `src.pipeline.kernels_at_once`."""
        return self.BLOCK * max(1, self.rows(x))

    def __call__(self, x, k, mu, axis=None, keepdims=False, out=None,
                 stream=None):
        if stream is None:
            return self._energy(x, k, mu, axis, keepdims, out)
        with stream:
            return self._energy(x, k, mu, axis, keepdims, out)

    def _energy(self, x, k, mu, axis, keepdims, out):
        rows = self.rows(x) if axis is None else 0
        if rows == 0:
            total = self.kernel(x, k, mu, axis=axis, keepdims=keepdims)
        else:
            flat = x.reshape(-1)
            length = flat.size // rows
            body = flat[:rows * length].reshape(rows, length)
            total = self.kernel(body, k, mu, axis=1).sum()
            if rows * length < flat.size:
                total += self.kernel(flat[rows * length:], k, mu)
            if keepdims:
                total = total.reshape((1,) * x.ndim)
        if out is None:
            return total.astype(x.dtype)
        if out.shape != total.shape:
            raise ValueError(f"Out shape is mismatched: {out.shape} != "
                             f"{total.shape}")
        out[...] = total
        return out


harmonic_energy = TwoStageEnergy(harmonic_energy_kernel)

_TWIN_TERMS = 1 << 20      # terms the energy twin holds at once


def _energy_terms(x, k, mu):
    """The map ``k * (x - mu) * (x - mu) / 2``, in T, left to right as C."""
    d = x - mu
    term = k * d
    term *= d
    term /= x.dtype.type(2)
    return term


@twins.register("harmonic_energy")
def _harmonic_energy_twin(x, k, mu, axis=None, keepdims=False):
    """Each term in T (x's dtype), the sum and the result in float64.

    The kernel accumulates in double (``reduce_type``) and writes its
    double (``float64 y``), so that a sum over a billion float32 terms keeps
    its digits; the twin does the same. It computes the terms a bounded
    block at a time, as the GPU computes them in registers.
    """
    x = np.asarray(x)
    t = x.dtype.type
    k, mu = t(k), t(mu)
    if axis is None and not keepdims:
        flat = x.reshape(-1)
        return np.float64(sum(
            np.sum(_energy_terms(flat[lo:lo + _TWIN_TERMS], k, mu),
                   dtype=np.float64)
            for lo in range(0, flat.size, _TWIN_TERMS)))
    if x.ndim == 2 and axis in (1, -1, (1,), (-1,)) and not keepdims:
        out = np.empty(x.shape[0], np.float64)
        step = max(1, _TWIN_TERMS // max(x.shape[1], 1))
        for lo in range(0, x.shape[0], step):
            out[lo:lo + step] = np.sum(
                _energy_terms(x[lo:lo + step], k, mu), axis=1,
                dtype=np.float64)
        return out
    return np.sum(_energy_terms(x, k, mu), axis=axis, keepdims=keepdims,
                  dtype=np.float64)
