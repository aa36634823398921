"""05, streams: the default stream beside other streams, NVIDIA's overlap
demo, MindSpore's chunked energy on one stream and two."""
import statistics

import numpy as np
from src import cp, cpx

from ..effect import DEVICE_ONLY, MIXED, Effect
from ..experiment import experiment, sync
from ..sizes import SIZES


@experiment
def default_stream():
    """05: how long the host waits for an event on the legacy default stream
    while a blocking or a non-blocking stream runs a kernel (medians of
    three)."""
    from src.kernels import launch_overlap
    from src.timing import Benchmark
    d_big = cp.zeros(SIZES["kernel_n"], dtype=cp.float32)
    launch_overlap(d_big, 0, d_big.size)           # warm-up: load it
    sync()

    def host_wait(stream):
        sync()
        launch_overlap(d_big, 0, d_big.size, stream=stream)
        with Benchmark() as waited:
            cp.cuda.Stream.null.record().synchronize()
        stream.synchronize()
        return waited.seconds

    blocking, non_blocking = [], []
    for _ in range(3):
        blocking.append(host_wait(cp.cuda.Stream()))
        non_blocking.append(host_wait(cp.cuda.Stream(non_blocking=True)))
    return {"blocking_s": statistics.median(blocking),
            "non_blocking_s": statistics.median(non_blocking)}


@experiment
def overlap_demo():
    """05: NVIDIA's overlap demo, sequential, V1 and V2, on a `Timeline`;
    fastest of nine runs of each (after one warm-up round), as
    the lesson keeps."""
    from src import pipeline, timeline
    from src.timeline import Timeline
    chunk, n_streams = SIZES["chunk"], SIZES["n_streams"]
    n = chunk * n_streams
    a = cpx.zeros_pinned(n, dtype=np.float32)
    d_a = cp.empty(n, dtype=cp.float32)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]

    def run(version):
        a[:] = 0
        if version == "sequential":
            tl = Timeline([cp.cuda.Stream.null])
            pipeline.sequential(pipeline.overlap_stages(a, d_a, 1),
                                timeline=tl)
            return tl.ops()
        return pipeline.measure(pipeline.overlap_stages(a, d_a, n_streams),
                                n_streams, streams, version)

    versions = ("sequential", "v1", "v2")
    runs = {v: [] for v in versions}
    for repeat in range(10):
        for v in versions:
            ops = run(v)
            if repeat > 0:
                runs[v].append(ops)
    demo = {v: min(runs[v], key=timeline.makespan) for v in versions}
    out = {f"{v}_ms": timeline.makespan(demo[v]) for v in versions}
    seq = demo["sequential"]
    out["seq_copies_ms"] = (timeline.busy(seq, "H2D")
                            + timeline.busy(seq, "D2H"))
    out["seq_kernel_ms"] = timeline.busy(seq, "kernel")
    one_engine = {"H2D": "copy engine", "D2H": "copy engine",
                  "kernel": "compute engine"}
    for v in ("v1", "v2"):
        out[f"one_engine_{v}_ms"] = timeline.makespan(
            timeline.replay(demo[v], one_engine))
    return out


@experiment
def energy():
    """05: MindSpore's chunked energy in chunks of 2**20 values on one and
    two streams, on a `Timeline` (events); fastest of three runs each after
    one warm-up round (the lesson keeps ten at its CPU size; at the GPU's
    size each round is 2 x 512 MiB of real work)."""
    from src import pipeline, timeline
    n_x = SIZES["energy_n"]
    n_chunks = n_x // SIZES["energy_chunk"]
    x = cpx.empty_pinned(n_x, dtype=np.float32)
    np.random.default_rng(0).random(dtype=np.float32, out=x)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    built = {n_s: pipeline.energy_stages(x, 1.0, 0.5, n_chunks, n_s)[0]
             for n_s in (1, 2)}
    fastest = {}
    for repeat in range(4):
        for n_s, stages in built.items():
            ops = pipeline.measure(stages, n_chunks, streams[:n_s])
            if repeat > 0 and (n_s not in fastest or timeline.makespan(ops)
                               < timeline.makespan(fastest[n_s])):
                fastest[n_s] = ops
    one = fastest[1]
    return {"one_ms": timeline.makespan(one),
            "two_ms": timeline.makespan(fastest[2]),
            "copy_ms": timeline.busy(one, "H2D"),
            "compute_ms": timeline.busy(one, "kernel")}


# what several effects below share
DEMO, ENERGY = ("chunk", "n_streams"), ("energy_n", "energy_chunk")
EFFECTS = [
    Effect("demo_copies_over_kernel",
           "overlap demo, sequential: copies over kernel",
           DEVICE_ONLY, "overlap_demo", "seq_copies_ms / seq_kernel_ms",
           ("05_2_overlap/demo_copies_seq_ms", "05_2_overlap/demo_kernel_seq_ms"),
           "demo_copies_seq_ms / demo_kernel_seq_ms", sizes=DEMO),
    Effect("demo_v1_speedup",
           "overlap demo: sequential over async V1",
           DEVICE_ONLY, "overlap_demo", "sequential_ms / v1_ms",
           ("05_2_overlap/demo_v1_speedup",), "demo_v1_speedup",
           gain=True, sizes=DEMO),
    Effect("demo_v2_speedup",
           "overlap demo: sequential over async V2",
           DEVICE_ONLY, "overlap_demo", "sequential_ms / v2_ms",
           ("05_2_overlap/demo_v2_speedup",), "demo_v2_speedup",
           gain=True, sizes=DEMO),
    Effect("one_copy_engine_v1_over_v2",
           "overlap demo replayed on one copy engine: V1 over V2",
           DEVICE_ONLY, "overlap_demo", "one_engine_v1_ms / one_engine_v2_ms",
           ("05_2_overlap/one_engine_v1_ms", "05_2_overlap/one_engine_v2_ms"),
           "one_engine_v1_ms / one_engine_v2_ms",
           gain=True, sizes=DEMO),
    Effect("energy_bound",
           "chunked energy, one stream: (copy + compute) / max",
           DEVICE_ONLY, "energy",
           "(copy_ms + compute_ms) / max(copy_ms, compute_ms)",
           ("05_3_pipeline/energy_bound",), "energy_bound",
           gain=True, sizes=ENERGY),
    Effect("energy_two_streams",
           "chunked energy: one stream over two",
           DEVICE_ONLY, "energy", "one_ms / two_ms",
           ("05_3_pipeline/speedup_2",), "speedup_2", gain=True, sizes=ENERGY),
    Effect("blocking_over_non_blocking_stream",
           "host wait on the default stream: blocking over non-blocking",
           MIXED, "default_stream", "blocking_s / non_blocking_s",
           ("05_1_queues/blocking_ms", "05_1_queues/non_blocking_ms"),
           "blocking_ms / non_blocking_ms",
           "the wait beside a non-blocking stream is a thread hand-off, "
           "slow on a loaded host",
           sizes=("kernel_n",)),
]
