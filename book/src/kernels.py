"""The book's CUDA kernels, built with CuPy's kernel classes, each with a twin.

Every kernel is made from a spec holding exactly the arguments of its CuPy
constructor (`Elementwise`, `Reduction`, `Raw`), kept in `SPECS` so that a
lesson can show the CUDA text (`source`) and the tests can compile it with
NVRTC (the specs are in `src.specs`). CuPy compiles a kernel on its first
launch, so building them here needs no GPU. Each kernel's NumPy twin is
registered in `src.twins` under the kernel's name: the CPU device model
runs it in place of the CUDA code. The energy reduction
(`harmonic_energy`) lives in `src.energy`; this module imports it and the
specs' names, so that every kernel is imported from here.
"""
import contextvars
import math
from contextlib import contextmanager

import numpy as np

from . import cp, twins
from .energy import (  # noqa: F401  (the lessons import them from here)
    TwoStageEnergy, harmonic_energy, harmonic_energy_kernel)
from .specs import (  # noqa: F401  (the lessons import them from here)
    SPECS, Elementwise, Raw, Reduction, build, source)


# --- %globaltimer stamps: when a kernel's blocks really ran ---------------
#
# Events say when a *stream* reached an operation and when it finished, not
# when its kernel got the GPU: a GPU runs kernels from several streams at
# once. The book's RawKernels can record it themselves: given a pair of
# stamps ``[first block start, last block end]`` (nanoseconds of the GPU's
# ``%globaltimer``), thread 0 of every block folds its block's start into
# ``stamps[0]`` with atomicMin and its end into ``stamps[1]`` with atomicMax.
# A null pointer (``NO_STAMPS``) records nothing. `src.timeline` hands the
# kernels launched inside ``Timeline.op`` a pair, through `stamping`.

NO_STAMPS = np.uint64(0)                    # a null pointer: no stamps
NEVER = np.uint64(np.iinfo(np.uint64).max)  # stamps[0] before any block ran

stamp_kernel = build(Raw(r"""
extern "C" __global__ void stamp_kernel(unsigned long long* stamps,
                                        unsigned long long spin_ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {                               // run for spin_ns, then stamp
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < spin_ns);
    stamps[0] = t;
    stamps[1] = t;
}
""", "stamp_kernel"))


@twins.register("stamp_kernel")
def _stamp_twin(grid, block, args, shared_mem=0):
    """Both stamps: the device clock when the kernel ends (its first read
    of the clock is its start, the next its end; the model charges the
    kernel ``spin_ns`` of device time, see its profile)."""
    twins.globaltimer_ns()
    args[0][:2] = twins.globaltimer_ns()


SPIN_NS = 500_000      # how long `stamp` runs: longer than the host takes
                       # to queue the next operation


def stamp(stamps, stream=None, spin_ns=SPIN_NS):
    """Queue a one-thread kernel on ``stream`` that runs for ``spin_ns``
    nanoseconds, then writes the GPU clock into ``stamps[0]`` and
    ``stamps[1]`` (a uint64 device array). An event recorded on the stream
    right after it then happens when the kernel ends, at the stamped time,
    as long as the host records it within ``spin_ns``: the stamp and the
    event mark the same moment on the two clocks."""
    stamp_kernel((1,), (1,), (_check_stamps(stamps), np.uint64(spin_ns)),
                 stream=stream)


_stamps_source = contextvars.ContextVar("stamps_source", default=None)


@contextmanager
def stamping(source):
    """Inside the block, kernels that can stamp and are given no stamps ask
    ``source()`` for a pair (a uint64 device array of 2) to write into."""
    token = _stamps_source.set(source)
    try:
        yield
    finally:
        _stamps_source.reset(token)


def active_stamps():
    """The stamps pair of the enclosing `stamping` block, or None."""
    source = _stamps_source.get()
    return None if source is None else source()


def _check_stamps(stamps):
    if not isinstance(stamps, cp.ndarray) or stamps.dtype != np.uint64 \
            or stamps.size < 2 or not stamps.flags.c_contiguous:
        raise TypeError("stamps must be a C-contiguous uint64 device array "
                        "of at least 2 elements (first start, last end)")
    return stamps


# --- NVIDIA's copy/compute overlap demo ------------------------------------

overlap_kernel = build(Raw(r'''
extern "C" __global__ void overlap_kernel(float* a, int offset, int n,
                                          unsigned long long* stamps)
{
    unsigned long long t0 = 0, t1;
    if (stamps && threadIdx.x == 0)    // when this block started (ns)
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    int i = offset + threadIdx.x + blockIdx.x * blockDim.x;
    if (i < offset + n) {
        float x = (float)i;
        float s = sinf(x), c = cosf(x);
        a[i] = a[i] + sqrtf(s * s + c * c);
    }
    if (stamps) {                      // the same for every thread
        __syncthreads();               // the whole block is done
        if (threadIdx.x == 0) {
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
            atomicMin(&stamps[0], t0); // first block's start
            atomicMax(&stamps[1], t1); // last block's end
        }
    }
}
''', "overlap_kernel"))


def launch_overlap(a, offset, n, stream=None, block_size=256, stamps=None):
    """Add ``sqrt(sin(i)**2 + cos(i)**2)`` (about 1) to ``a[offset:offset+n]``.

    ``a`` is the *whole* float32 array, as in NVIDIA's demo, so that ``x = i``
    is the global index and a chunk gives the same numbers as one launch over
    everything. A raw kernel sees only a pointer, so the checks CuPy cannot
    make are made here: dtype, contiguity, and that the chunk is inside ``a``.
    ``stamps`` (a uint64 device array of 2, ``[kernels.NEVER, 0]`` before the
    first launch) receives the ``%globaltimer`` of the first block's start
    and of the last block's end; by default, inside ``Timeline.op``, the
    timeline's pair for that operation (`active_stamps`), else none.
    """
    if not isinstance(a, cp.ndarray):
        raise TypeError("overlap_kernel needs a device array (cp.ndarray), "
                        f"got {type(a).__module__}.{type(a).__name__}")
    if a.dtype != np.float32:
        raise TypeError("overlap_kernel takes float* a: a float32 array, "
                        f"got {a.dtype}")
    if not a.flags.c_contiguous:
        raise ValueError("overlap_kernel indexes a[i] directly, so a must be "
                         "C-contiguous (a strided view is not)")
    offset, n = int(offset), int(n)
    if offset < 0 or n < 0 or offset + n > a.size:
        raise ValueError(f"chunk [{offset}, {offset + n}) is not inside the "
                         f"array of {a.size} elements")
    grid = overlap_grid(offset, n, block_size)
    if stamps is not None:
        _check_stamps(stamps)
    if n == 0:
        return
    if stamps is None:
        stamps = active_stamps()
    overlap_kernel((grid,), (block_size,),
                   (a, np.int32(offset), np.int32(n),
                    NO_STAMPS if stamps is None else stamps),
                   stream=stream)


def overlap_grid(offset, n, block_size=256):
    """The blocks `launch_overlap` launches for ``a[offset:offset+n]``, or
    a ValueError if their indices do not fit the kernel's ``int``: it
    computes ``offset + n`` and every launched thread's ``i`` in 32 bits,
    and the last thread's ``i`` is ``offset + grid * block_size - 1``,
    past the chunk when ``n`` is not a whole number of blocks. Past
    2**31 - 1 it would wrap to a negative ``i``, which passes
    ``i < offset + n`` and writes before ``a``."""
    grid = (n + block_size - 1) // block_size
    if offset + grid * block_size > np.iinfo(np.int32).max:
        raise ValueError("overlap_kernel indexes with a 32-bit int, so "
                         "offset + n, with n rounded up to whole blocks of "
                         f"{block_size} threads, must stay below 2**31")
    return grid


_TWIN_BLOCK = 1 << 18      # indices per step of the twin: fits in cache


@twins.register("overlap_kernel")
def _overlap_twin(grid, block, args, shared_mem=0):
    """In float32 like the kernel; a 1-D launch covers grid*block indices.
    It works through them a cache-sized block at a time, as a GPU runs
    thread blocks, so its cost per element does not depend on the launch
    size (one launch over everything costs what chunked launches cost).
    Given stamps (not a null pointer), it folds the device clock
    (`twins.globaltimer_ns`) at its start and at its end into them, as the
    kernel's first and last blocks do."""
    a, offset, n, stamps = args
    start = twins.globaltimer_ns()
    offset, n = int(offset), int(n)
    stop = offset + min(n, grid[0] * block[0])
    for lo in range(offset, stop, _TWIN_BLOCK):
        hi = min(lo + _TWIN_BLOCK, stop)
        x = np.arange(lo, hi).astype(np.float32)     # (float)i, rounded
        s, c = np.sin(x), np.cos(x)
        s *= s
        c *= c
        s += c
        a[lo:hi] += np.sqrt(s, out=s)
    if isinstance(stamps, np.ndarray):
        stamps[0] = min(int(stamps[0]), start)
        stamps[1] = max(int(stamps[1]), twins.globaltimer_ns())


# --- ForiLoop: the body x + x, one launch per step or all steps fused ------

double_it = build(Elementwise("T x", "T y", "y = x + x", "double_it"))


def _add_to_itself(x, out):
    """NumPy body ``x + x``, written into ``out``."""
    return np.add(x, x, out=out)


@twins.register("double_it")
def _double_it_twin(x, y):
    """``y = x + x``, one step of the loop body."""
    _add_to_itself(x, y)


def _loop_kernel(name, carries):
    """An ElementwiseKernel running ``n`` steps of ``carries`` in registers.

    ``carries`` is ``[(var, cuda_expr, numpy_fn)]``: each step sets every
    ``var`` to its ``cuda_expr`` of the previous step's values; ``numpy_fn(
    *values, out)`` is the same step in NumPy, for the twin.
    """
    names = [var for var, _, _ in carries]
    start = "".join(f"T _carry_{v} = {v};\n" for v in names)
    snapshot = ", ".join(f"{v} = _carry_{v}" for v in names)
    update = "".join(f"    _carry_{v} = {expr};\n" for v, expr, _ in carries)
    finish = "".join(f"{v}_n = _carry_{v};\n" for v in names)
    operation = (f"{start}for (int _step = 0; _step < n; ++_step) {{\n"
                 f"    const T {snapshot};\n{update}}}\n{finish}")
    kernel = build(Elementwise(
        ", ".join(f"T {v}" for v in names) + ", int32 n",
        ", ".join(f"T {v}_n" for v in names), operation, name))
    twins.register(name)(_loop_twin([fn for _, _, fn in carries]))
    return kernel


def _loop_twin(steps):
    """Twin of a `_loop_kernel`: really runs the ``n`` steps, in place."""
    def twin(*args):
        k = len(steps)
        inputs, n, outs = args[:k], args[k], args[k + 1:]
        for out, x in zip(outs, inputs):
            np.copyto(out, x)
        counts = np.broadcast_to(np.asarray(n, np.int32), outs[0].shape)
        fewest = int(counts.min(initial=np.iinfo(np.int32).max))
        current, spare = list(outs), [np.empty_like(o) for o in outs]
        for step in range(int(counts.max(initial=0))):
            for fn, into in zip(steps, spare):
                fn(*current, into)
            if step >= fewest:                # a per-element n: some are done
                done = counts <= step
                for into, old in zip(spare, current):
                    np.copyto(into, old, where=done)
            current, spare = spare, current
        for out, value in zip(outs, current):
            if value is not out:
                np.copyto(out, value)
    return twin


def fused_loop(name, cuda_body, numpy_body):
    """Kernel ``(x, n) -> x_n``: ``n`` steps of ``x = cuda_body``, one launch.

    ``cuda_body`` is a CUDA expression in ``x``; ``numpy_body(x, out)`` writes
    the same step into ``out``. One launch instead of ``n``: no per-step
    launch cost and the carry stays in a register.
    """
    return _loop_kernel(name, [("x", cuda_body, numpy_body)])


def fused_loop_jvp(name, cuda_body, cuda_tangent, numpy_body, numpy_tangent):
    """Kernel ``(x, dx, n) -> (x_n, dx_n)``: the loop and its forward tangent.

    ``cuda_tangent`` is the body's derivative applied to ``dx``, a CUDA
    expression in ``x`` and ``dx``; ``numpy_tangent(x, dx, out)`` is its
    twin. Both see the values from before the step.
    """
    return _loop_kernel(name, [
        ("x", cuda_body, lambda x, dx, out: numpy_body(x, out)),
        ("dx", cuda_tangent, numpy_tangent)])


double_n = fused_loop("double_n", "x + x", _add_to_itself)
double_n_jvp = fused_loop_jvp("double_n_jvp", "x + x", "dx + dx",
                              _add_to_itself,
                              lambda x, dx, out: _add_to_itself(dx, out))


# --- a bandwidth-bound reference --------------------------------------------

saxpy = build(Elementwise("float32 a, float32 x, float32 y", "float32 z",
                           "z = a * x + y", "saxpy"))


@twins.register("saxpy")
def _saxpy_twin(a, x, y, z):
    """In float32; the GPU may fuse ``a * x + y`` into one FMA (last bit)."""
    np.multiply(np.float32(a), x, out=z)
    z += y


# --- a gather, for the misuse catalogue's fault ------------------------------

gather = build(Raw(r"""
extern "C" __global__ void gather(const float* a, const long long* idx,
                                  float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a[idx[i]];         // no check: idx must index a
}
""", "gather"))


@twins.register("gather")
def _gather_twin(grid, block, args, shared_mem=0):
    """An index past the end of ``a`` raises IndexError, where a GPU
    faults (an index far outside the allocation: cudaErrorIllegalAddress);
    the model then reports CUDA's error at a later call."""
    a, idx, out, n = args
    n = min(int(n), math.prod(grid) * math.prod(block))
    out[:n] = a[idx[:n]]

