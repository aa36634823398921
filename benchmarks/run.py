"""Performance figures behind the book's speed claims, measured in one run.

    python benchmarks/run.py --json OUT.json [--quick]

Runs on whichever backend `src` picks (BOOK_BACKEND), prints a table and
writes one JSON object: each figure's median over repeats under its key,
with min, max and the number of repeats under "spread", plus the backend,
the device names and the machine. No figure is asserted anywhere: these are
measurements, and benchmarks/README.md says what each one means. The
figures are here; their registry, clocks, running and table are
`harness.py`.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (  # noqa: E402, F401  (FIGURES: for the tests)
    FIGURES, ROOT, clock, command_seconds, event_seconds, figure, run, sync,
    table)
from src import cp, pick  # noqa: E402


@figure("dispatch_us", "us", "<= 10")
def dispatch_us(quick):
    """Host microseconds to enqueue one small elementwise operation."""
    x = cp.ones(16, dtype=cp.float32)
    n = 500 if quick else 2000
    samples = []
    for _ in range(5 if quick else 9):
        sync()
        t = time.perf_counter()
        for _ in range(n):
            x + 1
        samples.append((time.perf_counter() - t) / n * 1e6)
    sync()
    return samples


@figure("large_op_ratio", "x", "<= 1.05")
def large_op_ratio(quick):
    """Time of ``multiply(x, 2, out=y)`` on 1e7 float32 through the backend,
    over the same NumPy call (the model's overhead on large work)."""
    n = 10**6 if quick else 10**7
    a = numpy.random.default_rng(0).random(n, dtype=numpy.float32)
    b = numpy.empty_like(a)
    x = cp.asarray(a)
    y = cp.empty_like(x)
    sync()

    def on_backend():
        cp.multiply(x, 2.0, out=y)
        sync()

    def on_numpy():
        numpy.multiply(a, 2.0, out=b)
    on_backend(), on_numpy()
    ratios = []
    for _ in range(5 if quick else 15):
        ratios.append(clock(on_backend, 1)[0] / clock(on_numpy, 1)[0])
    return ratios


def _overlap_parts(quick):
    """A pinned H2D copy and a kernel of about the same duration."""
    n = (1 << 20) if quick else (1 << 23)
    host = cp.cuda.alloc_pinned_memory(n * 4)
    src = numpy.frombuffer(host, numpy.float32, n)
    src[:] = 1
    dst = cp.empty(n, cp.float32)
    copy_s = cp.cuda.Stream(non_blocking=True)
    kern_s = cp.cuda.Stream(non_blocking=True)
    with kern_s:                  # filled on the stream that computes on it
        x = cp.ones(n // 4, cp.float32)

    def copy():
        dst.set(src, stream=copy_s)

    def kernel(reps):
        with kern_s:
            for _ in range(reps):
                cp.sin(x, out=x)

    def timed(work):
        t = time.perf_counter()
        work()
        copy_s.synchronize()
        kern_s.synchronize()
        return time.perf_counter() - t
    copy(), kernel(1)
    t_copy = statistics.median(timed(copy) for _ in range(5))
    t_one = statistics.median(timed(lambda: kernel(1)) for _ in range(5))
    reps = max(1, round(t_copy / t_one))
    return copy, lambda: kernel(reps), timed


@figure("overlap_efficiency", "fraction", ">= 0.9")
def overlap_efficiency(quick):
    """Busiest engine's time over the time of a copy and a kernel issued on
    two streams at once (1.0: perfect overlap)."""
    copy, kernel, timed = _overlap_parts(quick)
    out = []
    for _ in range(5 if quick else 11):
        t_copy, t_kernel = timed(copy), timed(kernel)
        t_both = timed(lambda: (copy(), kernel()))
        out.append(max(t_copy, t_kernel) / t_both)
    return out


@figure("queued_speedup", "x", ">= 3")
def queued_speedup(quick):
    """10,000 tiny operations, waiting after each, over queuing them all and
    waiting once (d2l's cost model: 10000(t1+t2+t3) vs t1 + 10000 t2 + t3)."""
    n = 1000 if quick else 10_000
    x = cp.ones(16, dtype=cp.float32)
    stream = cp.cuda.get_current_stream()

    def each():
        for _ in range(n):
            cp.add(x, 1, out=x)
            stream.synchronize()

    def once():
        for _ in range(n):
            cp.add(x, 1, out=x)
        stream.synchronize()
    each(), once()
    return [clock(each, 1)[0] / clock(once, 1)[0]
            for _ in range(3 if quick else 5)]


def _h2d_seconds(host, dev, stream):
    """Seconds of one H2D copy on the device's clock (events), as lesson 6
    times it: on a GPU the host clock adds the call; on the CPU device model
    it would time this machine's memcpy, not the modelled link."""
    start = stream.record()
    dev.set(host, stream=stream)
    end = stream.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) * 1e-3


@figure("pinned_pageable_ratio", "x", ">= 1.5")
def pinned_pageable_ratio(quick):
    """Host-to-device bandwidth from pinned memory over that from pageable
    memory, at 64 MiB (8 MiB with --quick)."""
    n = (8 << 20) if quick else (64 << 20)
    pageable = numpy.ones(n // 4, numpy.float32)
    pinned = numpy.frombuffer(cp.cuda.alloc_pinned_memory(n), numpy.float32)
    pinned[:] = 1
    dev = cp.empty(n // 4, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    _h2d_seconds(pinned, dev, stream), _h2d_seconds(pageable, dev, stream)
    return [_h2d_seconds(pageable, dev, stream)
            / _h2d_seconds(pinned, dev, stream)
            for _ in range(5 if quick else 11)]


def _loop_seconds(strategy, steps, n=10):
    """Wall seconds of ``fori_loop(0, steps, x + x)`` on ``n`` float32
    (MindSpore's example carries ones(10): launches dominate)."""
    from src.loops import DOUBLE, fori_loop
    x = cp.ones(n, dtype=cp.float32)

    def go():
        r = fori_loop(0, steps, DOUBLE, x, strategy=strategy)
        r.sum().item()
    go()
    return clock(go, 1)[0]


def _loop_speedup(strategy, quick):
    steps = 100 if quick else 1000
    return [_loop_seconds("eager", steps) / _loop_seconds(strategy, steps)
            for _ in range(3 if quick else 7)]


@figure("graph_speedup", "x", ">= 2")
def graph_speedup(quick):
    """Per-step time of the ForiLoop body ``x + x`` on 10 floats launched
    eagerly, over the same loop replayed as a captured graph."""
    return _loop_speedup("graph", quick)


@figure("fused_speedup", "x", ">= 20")
def fused_speedup(quick):
    """The same eager loop over one fused kernel with the loop inside."""
    return _loop_speedup("fused", quick)


# NVIDIA's size, and a size where device work dominates on a GPU: at
# NVIDIA's size an H100 runs the whole sequential demo in 0.8 ms, and the
# async versions are bound by how fast Python issues the work. The model
# keeps a small multiple (2 cores).
LARGE_DEMO = pick(cpu=2, gpu=64)


def _overlap_demo(quick, scale=1):
    """NVIDIA's copy/compute overlap demo: (sequential ops, V2 ops) runs,
    at ``scale`` times NVIDIA's size."""
    from src import cpx, pipeline
    from src.timeline import Timeline
    n_streams = 4
    n = 4 * 1024 * 256 * n_streams * scale // (8 if quick else 1)
    host = cpx.zeros_pinned(n, dtype=numpy.float32)
    dev = cp.empty(n, dtype=cp.float32)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]

    def sequential():
        tl = Timeline([cp.cuda.Stream.null])
        pipeline.sequential(pipeline.overlap_stages(host, dev, 1),
                            timeline=tl)
        return tl.ops()

    def v2():
        return pipeline.measure(pipeline.overlap_stages(host, dev, n_streams),
                                n_streams, streams, "v2")
    sequential(), v2()
    runs = [(sequential(), v2()) for _ in range(5 if quick else 11)]
    return runs, n // n_streams, n_streams


_demo_cache = {}


def _demo(quick, scale=1):
    if (quick, scale) not in _demo_cache:
        _demo_cache[quick, scale] = _overlap_demo(quick, scale)
    return _demo_cache[quick, scale]


def _speedups(quick, scale):
    from src.timeline import makespan
    runs, _, _ = _demo(quick, scale)
    return [makespan(seq) / makespan(v2) for seq, v2 in runs]


def _bounds(quick, scale):
    """``pipeline.ideal_speedup`` of each sequential run's busy times, with
    as many chunk kernels at once as fit beside each other (1 on the model
    and for chunks that fill the GPU)."""
    from src.pipeline import LABELS, ideal_speedup, kernels_at_once
    from src.timeline import busy
    runs, chunk, n_streams = _demo(quick, scale)
    at_once = [kernels_at_once(chunk, n_streams) if lb == "kernel" else 1
               for lb in LABELS]
    return [ideal_speedup(*(busy(seq, lb) for lb in LABELS), at_once=at_once)
            for seq, _ in runs]


@figure("stream_speedup_v2", "x", ">= 0.9 * stream_ideal_speedup")
def stream_speedup_v2(quick):
    """NVIDIA's overlap demo on 4 streams: sequential time over async V2
    time (published, RTX 2070 SUPER: 5.69 / 4.18 = 1.36)."""
    return _speedups(quick, 1)


@figure("stream_ideal_speedup", "x", "(bound)")
def stream_ideal_speedup(quick):
    """The bound for the same work: engines' total busy time over the
    busiest engine's, from the sequential run's measured busy times."""
    return _bounds(quick, 1)


@figure("stream_speedup_v2_large", "x",
        ">= 0.9 * stream_ideal_speedup_large")
def stream_speedup_v2_large(quick):
    """The same demo at LARGE_DEMO times NVIDIA's size (64 on a GPU, where
    device work then dominates the host's issuing; 2 on the model)."""
    return _speedups(quick, LARGE_DEMO)


@figure("stream_ideal_speedup_large", "x", "(bound)")
def stream_ideal_speedup_large(quick):
    """The bound for the large demo, as for stream_ideal_speedup."""
    return _bounds(quick, LARGE_DEMO)


@figure("energy_stream_speedup", "x", "(MindSpore: 1.10)")
def energy_stream_speedup(quick):
    """MindSpore's chunked energy sum(0.5 k (x - mu)^2) in chunks of 2**20
    values: one stream's time over two streams' (published: 10.925 s /
    9.929 s = 1.10)."""
    from src import cpx, pipeline
    from src.timeline import makespan
    n = (1 << 22) if quick else (1 << 24)
    x = cpx.empty_pinned(n, dtype=numpy.float32)
    x[:] = numpy.random.default_rng(0).random(n, dtype=numpy.float32)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    built = {s: pipeline.energy_stages(x, 1.0, 0.5, n >> 20, s)[0]
             for s in (1, 2)}

    def ms(n_streams):
        return makespan(pipeline.measure(built[n_streams], n >> 20,
                                         streams[:n_streams]))
    ms(1), ms(2)
    return [ms(1) / ms(2) for _ in range(5 if quick else 11)]


def _energy_input(quick):
    n = (1 << 20) if quick else pick(cpu=1 << 22, gpu=1 << 28)
    return cp.random.default_rng(0).random(n, dtype=cp.float32)


@figure("energy_kernel_vs_one_liner", "x", ">= 1")
def energy_kernel_vs_one_liner(quick):
    """The book's `harmonic_energy` against the one-liner with temporaries,
    ``cp.sum(0.5 * (y - 0.5) ** 2)``: the one-liner's device time over the
    kernel's (events), on 2**28 float32 on a GPU (2**22 on the model)."""
    from src.kernels import harmonic_energy
    y = _energy_input(quick)
    repeats = 5 if quick else 11
    kernel = event_seconds(lambda: harmonic_energy(y, 1.0, 0.5), repeats)
    one_liner = event_seconds(lambda: cp.sum(0.5 * (y - 0.5) ** 2),
                               repeats)
    return [o / k for o, k in zip(one_liner, kernel)]


def _copy_fraction(energy, quick):
    """The rate ``energy(y, 1.0, 0.5)`` reads ``y`` at, over the rate a
    device-to-device copy of ``y`` moves bytes (reading and writing them),
    both by events; 1.0 = as fast as the memory system allows."""
    y = _energy_input(quick)
    z = cp.empty_like(y)
    repeats = 5 if quick else 11
    kernel = event_seconds(lambda: energy(y, 1.0, 0.5), repeats)

    def copy_y():
        z[...] = y
    copy = event_seconds(copy_y, repeats)
    return [(y.nbytes / k) / (2 * y.nbytes / c)
            for k, c in zip(kernel, copy)]


@figure("energy_kernel_copy_fraction", "x", ">= 0.8 (GPU)")
def energy_kernel_copy_fraction(quick):
    """How close `harmonic_energy` comes to the memory's limit: the rate it
    reads ``y`` at, over the rate a device-to-device copy of ``y`` moves
    bytes (reading and writing them), both by events; 1.0 = as fast as
    the memory system allows."""
    from src.kernels import harmonic_energy
    return _copy_fraction(harmonic_energy, quick)


@figure("energy_raw_copy_fraction", "x", ">= 0.8 (GPU)")
def energy_raw_copy_fraction(quick):
    """The same fraction for a kernel written for speed
    (`benchmarks/energy_ceiling.py`: 16-byte loads, a grid-stride loop,
    warp shuffles): the ceiling `energy_kernel_copy_fraction` is read
    against."""
    from energy_ceiling import raw_energy
    return _copy_fraction(raw_energy, quick)


@figure("test_suite_s", "s", "<= 240")
def test_suite_s(quick):
    """Wall time of the README's test command after installation (with
    --quick: one small test file, to exercise the harness)."""
    argv = [sys.executable, "-m", "pytest", "-q"]
    if quick:
        argv.append("tests/test_backend.py")
    return [command_seconds(argv)]


@figure("book_build_s", "s", "<= 240")
def book_build_s(quick):
    """Wall time of the README's book build after installation, from a clean
    build folder (with --quick: one page with no links to others)."""
    import shutil
    jb = os.path.join(os.path.dirname(sys.executable), "jupyter-book")
    target = "book/fidelity.md" if quick else "."
    out = os.path.join(ROOT, "_build") if not quick else None
    if out:
        shutil.rmtree(out, ignore_errors=True)
    return [command_seconds([jb, "build", target, "-W", "--keep-going"])]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True, help="where to write the JSON")
    p.add_argument("--quick", action="store_true",
                   help="small sizes and few repeats (for tests)")
    p.add_argument("--only", nargs="*", help="measure only these figures")
    args = p.parse_args(argv)
    result = run(args.only, args.quick)
    print(table(result))
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
