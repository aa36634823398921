"""A hand-written energy kernel: the ceiling `harmonic_energy` is measured
against (`benchmarks/run.py`, ``energy_raw_copy_fraction``).

The book's `harmonic_energy` (`src.energy`) is a CuPy `ReductionKernel` run
in two stages: a lesson can show it in five lines, and CuPy writes the
loops. How close does it come to the memory's limit? This module answers
with a kernel written for speed, `energy_partials`, a `RawKernel`: each
thread reads four floats at a time (one 16-byte load), strides over the
whole array (a grid-stride loop), keeps two accumulators in double, and
each block sums its threads with warp shuffles into one partial sum; then
``cp.sum`` adds the partials. It computes what `harmonic_energy` computes,
``sum(k * (x - mu) * (x - mu) / 2)`` with each term in float32 and the sum
in float64, in another order. Not part of the book: a benchmark's
reference, with a NumPy twin so that it runs on the CPU device model too.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "book"))
from src import cp, twins  # noqa: E402
from src.devices import multiprocessors  # noqa: E402

NAME = "energy_partials"

CODE = r"""
extern "C" __global__ void energy_partials(const float* __restrict__ x,
                                           long long n, float k, float mu,
                                           double* __restrict__ partials)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = n / 4;
    double s0 = 0.0, s1 = 0.0;
    for (long long i = first; i < n4; i += stride) {   // 16 bytes a load
        float4 v = x4[i];
        float d;
        d = v.x - mu; s0 += (double)(k * d * d / 2);
        d = v.y - mu; s1 += (double)(k * d * d / 2);
        d = v.z - mu; s0 += (double)(k * d * d / 2);
        d = v.w - mu; s1 += (double)(k * d * d / 2);
    }
    for (long long i = 4 * n4 + first; i < n; i += stride) {  // 0-3 left
        float d = x[i] - mu;
        s0 += (double)(k * d * d / 2);
    }
    double s = s0 + s1;
    for (int offset = 16; offset > 0; offset >>= 1)    // within a warp
        s += __shfl_down_sync(0xffffffffu, s, offset);
    __shared__ double warp_sums[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
        warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {                                   // the block's warps
        s = (lane < (blockDim.x + 31) / 32) ? warp_sums[lane] : 0.0;
        for (int offset = 16; offset > 0; offset >>= 1)
            s += __shfl_down_sync(0xffffffffu, s, offset);
        if (lane == 0)
            partials[blockIdx.x] = s;
    }
}
"""

energy_partials = cp.RawKernel(CODE, NAME)

BLOCK = 256             # threads per block
BLOCKS_PER_SM = 8       # 2,048 threads per multiprocessor: a full one


def launch_shape(device=None):
    """``(grid, block)``: enough blocks to fill every multiprocessor (the
    count asked once per device: the first GPU run, asking it in each
    call, read the kernel at 0.22 of a copy's rate; 0.95 without)."""
    return (multiprocessors(device) * BLOCKS_PER_SM,), (BLOCK,)


def raw_energy(x, k, mu):
    """``sum(k * (x - mu)**2 / 2)`` of a C-contiguous float32 device array
    whose data is 16-byte aligned (float4 loads), as a float32 0-d array."""
    if not isinstance(x, cp.ndarray) or x.dtype != np.float32:
        raise TypeError("energy_partials takes float* x: a float32 device "
                        "array")
    if not x.flags.c_contiguous or x.data.ptr % 16:
        raise ValueError("energy_partials reads x four floats at a time: x "
                         "must be C-contiguous and 16-byte aligned")
    grid, block = launch_shape()
    partials = cp.empty(grid[0], dtype=cp.float64)
    energy_partials(grid, block, (x, np.int64(x.size), np.float32(k),
                                  np.float32(mu), partials))
    return partials.sum().astype(np.float32)


_TWIN_VECTORS = 1 << 18     # float4 loads the twin holds at once


@twins.register(NAME)
def _energy_partials_twin(grid, block, args, shared_mem=0):
    """Each block's partial sum, as the kernel assigns the values: float4
    load ``i`` (values ``4i`` to ``4i + 3``) to thread ``i % stride``, the
    0-3 values past the last whole float4 to threads 0-3 (block 0); each
    term in float32 as C computes ``k * d * d / 2``, the sums in double."""
    x, n, k, mu, partials = args
    n, k, mu = int(n), np.float32(k), np.float32(mu)
    threads, stride = block[0], grid[0] * block[0]
    partials[:grid[0]] = 0.0

    def terms(values):
        d = values - mu
        t = k * d
        t *= d
        t /= np.float32(2)
        return t.astype(np.float64)
    n4 = n // 4
    for lo in range(0, n4, _TWIN_VECTORS):
        hi = min(lo + _TWIN_VECTORS, n4)
        per_load = terms(x[4 * lo:4 * hi]).reshape(-1, 4).sum(axis=1)
        owner = (np.arange(lo, hi) % stride) // threads
        partials[:grid[0]] += np.bincount(owner, weights=per_load,
                                          minlength=grid[0])
    if 4 * n4 < n:
        partials[0] += terms(x[4 * n4:n]).sum()
