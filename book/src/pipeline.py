"""Chunked H2D -> kernel -> D2H pipelines, issued over any number of streams.

A pipeline is a dict of stages, ``{label: fn(chunk, stream)}``, each queueing
its work for one chunk on ``stream``. Chunk ``c`` runs on
``streams[c % len(streams)]``. V1 issues every stage of a chunk before the
next chunk; V2 issues one stage for a round of chunks (one per stream)
before the next stage. Sequential is one chunk on one stream.
"""
from . import cp
from .kernels import harmonic_energy, launch_overlap
from .timeline import Timeline, busy, makespan, work

ORDERS = ("v1", "v2")


def chunks(n, n_chunks):
    """``(offset, size)`` of ``n_chunks`` near-equal chunks covering ``n``."""
    if not 1 <= n_chunks <= max(n, 1):
        raise ValueError(f"cannot cut {n} elements into {n_chunks} chunks")
    edges = [c * n // n_chunks for c in range(n_chunks + 1)]
    return [(a, b - a) for a, b in zip(edges, edges[1:])]


def issue_order(n_chunks, n_streams, n_stages, order="v1"):
    """The ``(chunk, stage)`` pairs in the order the host issues them."""
    if order == "v1":
        return [(c, s) for c in range(n_chunks) for s in range(n_stages)]
    if order == "v2":
        pairs = []
        for first in range(0, n_chunks, n_streams):
            rnd = range(first, min(first + n_streams, n_chunks))
            pairs += [(c, s) for s in range(n_stages) for c in rnd]
        return pairs
    raise ValueError(f"order must be one of {ORDERS}, got {order!r}")


def run(stages, n_chunks, streams, order="v1", timeline=None):
    """Issue every stage of every chunk in ``order``, each recorded on
    ``timeline`` if given. Returns at once: the work is only queued."""
    labels = list(stages)
    for c, s in issue_order(n_chunks, len(streams), len(labels), order):
        stream, label = streams[c % len(streams)], labels[s]
        if timeline is None:
            stages[label](c, stream)
        else:
            with timeline.op(stream, label, f"{label} {c}"):
                stages[label](c, stream)


def sequential(stages, stream=None, timeline=None):
    """Each stage once, for stages built with one chunk, on ``stream``
    (default: the default stream)."""
    run(stages, 1, [stream or cp.cuda.Stream.null], "v1", timeline)


def measure(stages, n_chunks, streams, order="v1"):
    """Run the pipeline on a fresh `Timeline`; return its ops (waits)."""
    timeline = Timeline(streams)
    run(stages, n_chunks, streams, order, timeline)
    return timeline.ops()


def overlap_stages(host, dev, n_chunks):
    """NVIDIA's overlap demo: copy a chunk of pinned ``host`` into ``dev``,
    add about 1 to it with `launch_overlap`, copy it back into ``host``."""
    parts = chunks(host.size, n_chunks)

    def span(c):
        offset, size = parts[c]
        return slice(offset, offset + size)

    def h2d(c, stream):
        dev[span(c)].set(host[span(c)], stream=stream)

    def kernel(c, stream):
        launch_overlap(dev, *parts[c], stream=stream)

    def d2h(c, stream):
        dev[span(c)].get(stream=stream, out=host[span(c)], blocking=False)
    return {"H2D": h2d, "kernel": kernel, "D2H": d2h}


def energy_stages(x, k, mu, n_chunks, n_streams):
    """MindSpore's chunked energy ``sum(k * (x - mu)**2 / 2)``: copy chunk
    ``c`` of host ``x`` into its stream's buffer, reduce it into
    ``partials[c]``. Returns ``(stages, partials)``; the energy is the sum
    of ``partials`` once the streams are done."""
    parts = chunks(x.size, n_chunks)
    size = max(n for _, n in parts)
    buffers = [cp.empty(size, x.dtype) for _ in range(n_streams)]
    partials = cp.empty(n_chunks, x.dtype)   # every element gets written
    k, mu = x.dtype.type(k), x.dtype.type(mu)

    def h2d(c, stream):
        offset, n = parts[c]
        buffers[c % n_streams][:n].set(x[offset:offset + n], stream=stream)

    def kernel(c, stream):
        n = parts[c][1]
        harmonic_energy(buffers[c % n_streams][:n], k, mu, out=partials[c],
                        stream=stream)
    return {"H2D": h2d, "kernel": kernel}, partials


def ideal_speedup(*engine_ms, at_once=None):
    """The most overlap can give to work whose engine classes (copies in,
    kernels, copies out, ...) needed ``engine_ms`` milliseconds each when
    nothing overlapped (e.g. one stream's `timeline.busy` per label):
    ``sum(engine_ms) / max(ms / n for ms, n in zip(engine_ms, at_once))``,
    e.g. ``(copy + compute) / max(copy, compute)``.

    It assumes (1) that the classes can overlap each other completely, and
    (2) that a class's work takes at least ``ms / n`` overlapped, where
    ``n = at_once[i]`` (default 1) is how many of its operations can run
    side by side, each no faster than alone. ``n = 1`` holds for copies in
    one direction: they share the link however many copy engines a GPU
    has (``asyncEngineCount``); and for kernels that fill the GPU. It does
    not hold for kernels that leave multiprocessors idle on a GPU that runs
    kernels from several streams at once (``concurrentKernels``): there
    pass `kernels_at_once` for the kernels' class, or the bound can be
    exceeded (single-block kernels on eight streams beat ``n = 1``'s bound
    fourfold on an H100).
    """
    at_once = (1,) * len(engine_ms) if at_once is None else tuple(at_once)
    if len(at_once) != len(engine_ms) or min(at_once, default=1) < 1:
        raise ValueError("at_once needs one count >= 1 per engine class")
    return sum(engine_ms) / max(ms / n for ms, n in zip(engine_ms, at_once))


def kernels_at_once(threads_per_kernel, n_streams, device=None):
    """At most how many kernels of ``threads_per_kernel`` threads each, one
    per stream, can run side by side: 1 on a device without
    ``concurrentKernels`` (the CPU device model), else no more than the
    streams and than fit on the device at its maximum of resident threads
    (``multiProcessorCount * maxThreadsPerMultiProcessor``; registers and
    shared memory can only lower it, so the bound stays a bound)."""
    device = cp.cuda.runtime.getDevice() if device is None else device
    props = cp.cuda.runtime.getDeviceProperties(device)
    if not props.get("concurrentKernels", 0):
        return 1
    resident = (props["multiProcessorCount"]
                * props["maxThreadsPerMultiProcessor"])
    fit = max(1, resident // max(1, int(threads_per_kernel)))
    return max(1, min(int(n_streams), fit))


LABELS = ("H2D", "kernel", "D2H")


def gained(ops, labels=LABELS):
    """What overlap gave a run: its ops' durations added up (`timeline.work`)
    over its total time."""
    return sum(work(ops, lb) for lb in labels) / makespan(ops)


def run_bound(ops, labels=LABELS):
    """The most overlap could have given this run: its ops' durations added
    up over the longest time any one label kept busy (`timeline.busy`,
    the union of its ops' intervals). It always holds, on any GPU, because
    a run cannot end before every label's busy time has passed:
    ``gained(ops) <= run_bound(ops)``. It is only as true as the starts are: an
    inferred start makes its label's ops run one at a time."""
    return (sum(work(ops, lb) for lb in labels)
            / max(busy(ops, lb) for lb in labels))


def produce_and_consume(producer, consumer, ones, earlier, d_earlier, wait):
    """Stream A (``producer``) copies ``earlier`` into ``d_earlier``, then
    ``ones`` into ``x``, a new device array of zeros; stream B
    (``consumer``) sums ``x``, after ``wait_event`` when ``wait``. Returns
    the sum and the timeline's ops. Without the wait nothing orders B's sum
    after A's copy: a race, and B may sum the zeros."""
    x = cp.zeros(ones.size, dtype=ones.dtype)   # yesterday's data: zeros
    cp.cuda.Device().synchronize()
    tl = Timeline([producer, consumer], names=["A (producer)",
                                               "B (consumer)"])
    with tl.op(producer, "H2D", "earlier copy"):
        d_earlier.set(earlier, stream=producer)
    with tl.op(producer, "H2D", "copy x in"):
        x.set(ones, stream=producer)
    if wait:
        consumer.wait_event(producer.record())
    with tl.op(consumer, "kernel", "sum of x"):
        with consumer:
            total = x.sum()
    consumer.synchronize()
    return float(total), tl.ops()
