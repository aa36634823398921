"""Chunked H2D -> kernel -> D2H pipelines, issued over any number of streams.

A pipeline is a dict of stages, ``{label: fn(chunk, stream)}``, each queueing
its work for one chunk on ``stream``. Chunk ``c`` runs on
``streams[c % len(streams)]``. V1 issues every stage of a chunk before the
next chunk; V2 issues one stage for a round of chunks (one per stream)
before the next stage. Sequential is one chunk on one stream.
"""
from . import cp
from .kernels import harmonic_energy, launch_overlap
from .timeline import Timeline

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


def ideal_speedup(*engine_ms):
    """The most overlap can give: the engines' total busy time over the
    busiest engine's, e.g. ``(copy + compute) / max(copy, compute)``, when
    the others' work hides entirely under the busiest one's."""
    return sum(engine_ms) / max(engine_ms)
