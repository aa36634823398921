"""Timelines of device work, measured with CUDA events, one lane per stream.

Each operation is bracketed by two events on its stream. The first is
stamped when the stream *reaches* the operation, which may be before the
operation really starts: the engine that runs it (a copy engine, or the
SMs for a kernel) may be busy with other streams' work. The second is
stamped when the operation has finished.

When did an operation *start*? Events cannot say. The book's own
RawKernels can: launched inside ``Timeline.op``, they record the GPU's
``%globaltimer`` at their first block's start (`src.kernels.stamping`),
which the timeline aligns with its events through a stamp taken right at
its origin. Those starts are *measured*. Every other start is *inferred*
by `on_engines`, which assumes that the ops of one label take turns:
copies in one direction on that direction of the link, kernels on the
compute engine. For copies that is the link's time, not the copy
engines': a GPU with several copy engines (an H100 has three) may keep
two copies in one direction in flight at once, but they share the link's
bandwidth, so their inferred durations still add up to the time the link
was busy (its later copy's start is drawn late). For kernels it does not
hold on a GPU that runs kernels from several streams concurrently
(``concurrentKernels``). `gantt` draws inferred starts differently and
names the assumption in its legend.

`Timeline` records the operations; `gantt` draws them; `chrome_trace`
exports them for Perfetto and chrome://tracing; `busy` and `work` total
them per label.
"""
import json
import math
from contextlib import contextmanager
from typing import NamedTuple

from . import cp, kernels
from .timing import EventTimer

# What the ops of each label take turns on when their starts are inferred
# (`on_engines`): copies, each direction of the link, however many copy
# engines the GPU has (asyncEngineCount; copies in one direction share the
# link's bandwidth); kernels, the compute engine. The CPU device model has
# one copy engine per direction, so there the two agree.
ENGINES = {"H2D": "link H2D", "kernel": "compute engine", "D2H": "link D2H"}

#: The assumption behind inferred starts, as `gantt`'s legend names it.
INFERRED_LABEL = ("start inferred, not measured: copies in one\n"
                  "direction take turns on the link, kernels\n"
                  "on the compute engine")

COLORS = {"H2D": "tab:blue", "kernel": "tab:orange", "D2H": "tab:green"}


class Op(NamedTuple):
    """One operation, in milliseconds since the timeline's origin event."""
    lane: str       # the stream it was issued on
    label: str      # "H2D", "kernel", "D2H" (or any other label)
    name: str       # what to call it in a trace, e.g. "H2D 2"
    ready: float    # the stream reached it (its first event)
    start: float    # it began: measured, or inferred (see `on_engines`)
    end: float      # it finished (its second event)
    measured: bool = False   # start measured by the kernel (%globaltimer)


def _lane_name(stream, i):
    return "default stream" if stream.ptr == 0 else f"stream {i}"


_SLOTS = 256        # stamp pairs per device buffer


class _Stamps:
    """Pairs ``[first block start, last block end]`` (uint64 ns) handed to
    the kernels of a timeline's operations, ``[NEVER, 0]`` until a kernel
    writes them. The first buffer is filled before the timeline's origin,
    which every stream waits for; a further one is filled on the stream
    that needs it, and only that stream's operations use it."""

    def __init__(self, stream):
        self.shared = self._buffer(stream)
        self.used = 0
        self.own = {}               # stream pointer -> (buffer, used)
        self.buffers = [self.shared]

    @staticmethod
    def _buffer(stream):
        with stream:
            buf = cp.empty((_SLOTS, 2), cp.uint64)
            buf[:, 0] = kernels.NEVER
            buf[:, 1] = 0
        return buf

    def take(self, stream):
        """A fresh pair for an operation on ``stream``: ``(index, pair)``."""
        if self.used < _SLOTS:
            self.used += 1
            return (0, self.used - 1), self.shared[self.used - 1]
        buf, used = self.own.get(stream.ptr, (None, _SLOTS))
        if used == _SLOTS:
            buf, used = self._buffer(stream), 0
            self.buffers.append(buf)
        self.own[stream.ptr] = (buf, used + 1)
        b = next(i for i, x in enumerate(self.buffers) if x is buf)
        return (b, used), buf[used]

    def host(self):
        """Every buffer on the host (call once their kernels are done)."""
        return [cp.asnumpy(b) for b in self.buffers]


class Timeline:
    """An `EventTimer` around each operation issued on ``streams``.

    An origin event is recorded on the first stream and every other stream
    waits for it, so that no operation can precede the origin. Right
    before it, a one-thread kernel runs for half a millisecond and then
    stamps the GPU clock: the origin event happens when that kernel ends,
    so the stamp and the event mark the same moment, and kernels' own clock
    stamps can be placed on the timeline (to within the event's and the
    clock's resolution, a microsecond or so). A measured start is
    kept between the op's ``ready`` and ``end``. The first timeline of a
    process launches that kernel for the first time: with CUDA's lazy
    loading, loading it may wait for the work already queued on the device.
    """

    def __init__(self, streams, names=None):
        self.streams = list(streams)
        self.names = list(names) if names is not None else [
            _lane_name(s, i) for i, s in enumerate(self.streams)]
        first = self.streams[0]
        self._stamps = _Stamps(first)
        self._origin_slot, pair = self._stamps.take(first)
        kernels.stamp(pair, stream=first)
        self.origin = first.record()
        for s in self.streams[1:]:
            s.wait_event(self.origin)
        self._marks = []

    @contextmanager
    def op(self, stream, label, name=None):
        """Record the work queued in the ``with`` block on ``stream``. The
        book's kernels launched in the block stamp their start (see
        `src.kernels.stamping`)."""
        if stream not in self.streams:
            raise ValueError("this stream is not on the timeline: pass it "
                             "to Timeline(streams) first")
        lane = self.names[self.streams.index(stream)]
        timer = EventTimer(stream)
        slot = []

        def stamps():
            if not slot:
                slot.append(self._stamps.take(stream))
            return slot[0][1]
        with timer, kernels.stamping(stamps):
            yield
        self._marks.append((lane, label, name or label, timer,
                            slot[0][0] if slot else None))

    def ops(self, engines=ENGINES):
        """The recorded operations (waits for them), in issue order; starts
        measured where a kernel stamped them, else inferred (`on_engines`)."""
        for *_, timer, _ in self._marks:
            timer.end.synchronize()
        host = self._stamps.host() if self._marks else None
        if host is not None:
            b, i = self._origin_slot
            origin_ns = int(host[b][i, 0])
        raw = []
        for lane, label, name, timer, slot in self._marks:
            ready, end = self._ms(timer.start), self._ms(timer.end)
            start, measured = 0.0, False
            if slot is not None and host[slot[0]][slot[1], 0] \
                    != kernels.NEVER:
                first = int(host[slot[0]][slot[1], 0])
                start = min(max((first - origin_ns) / 1e6, ready), end)
                measured = True
            raw.append(Op(lane, label, name, ready, start, end, measured))
        return on_engines(raw, engines)

    def _ms(self, event):
        return cp.cuda.get_elapsed_time(self.origin, event)


def on_engines(ops, engines=ENGINES):
    """Set each op's ``start`` where it was not measured: when its stream
    reached it *and* its engine (in `ENGINES`) was free. This *infers* that
    an engine runs one op at a time, so that its ops ran in the order they
    finished. For copies the engine is a direction of the link: copies in
    one direction on several copy engines share its bandwidth, so each
    copy's inferred span is the link time it had to itself, and together
    they add up to the time the link was busy (`work` equals `busy`); a
    copy that really started beside another is drawn as starting later.
    False of kernels on a GPU with concurrent kernels. Labels with no
    engine start when they are ready. A measured start (``op.measured``)
    is kept, and its op still occupies its engine."""
    start = {}
    free = {}
    for i in sorted(range(len(ops)), key=lambda i: ops[i].end):
        op = ops[i]
        engine = engines.get(op.label)
        if op.measured:
            start[i] = op.start
        else:
            begin = max(op.ready, free.get(engine, -math.inf))
            start[i] = min(begin, op.end)
        if engine is not None:
            free[engine] = max(op.end, free.get(engine, -math.inf))
    return [op._replace(start=start[i]) for i, op in enumerate(ops)]


def replay(ops, engines):
    """Replay measured durations on engines that each run their ops in
    *issue order*, one at a time (one hardware queue per engine): an op
    waits for its stream's previous op and for the op issued before it on
    its engine. With ``{"H2D": "copy", "D2H": "copy", ...}`` this is a GPU
    with a single copy engine."""
    stream_free, engine_free, out = {}, {}, []
    for op in ops:
        ready = stream_free.get(op.lane, 0.0)
        engine = engines.get(op.label)
        start = max(ready, engine_free.get(engine, 0.0))
        end = start + (op.end - op.start)
        stream_free[op.lane] = end
        if engine is not None:
            engine_free[engine] = end
        out.append(op._replace(ready=ready, start=start, end=end,
                               measured=False))
    return out


def makespan(ops):
    """Milliseconds from the origin until the last op finished."""
    return max(op.end for op in ops)


def busy(ops, label):
    """Milliseconds during which at least one op labelled ``label`` ran:
    the length of the union of their ``[start, end]`` intervals. Equal to
    `work` when they ran one at a time (as inferred starts always do); less
    when they overlapped, as kernels on several streams can on a GPU."""
    spans = sorted((op.start, op.end) for op in ops if op.label == label)
    total, reach = 0.0, -math.inf
    for a, b in spans:
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


def work(ops, label):
    """Milliseconds of the ops labelled ``label`` added up, each from its
    start to its end: what they would take run one after another."""
    return sum(op.end - op.start for op in ops if op.label == label)


def inferred(ops):
    """The ops whose start was inferred, not measured."""
    return [op for op in ops if not op.measured]


def lanes(ops):
    """The lanes of ``ops``, in the order they first appear."""
    return list(dict.fromkeys(op.lane for op in ops))


INFERRED_ALPHA = 0.45     # inferred starts: lighter bars with a dashed edge

#: How a wait is hatched, by whether the op's start was measured: the two
#: waits mean different things (a measured wait: the stream reached the op,
#: which had not started; an inferred one: the op waited for its engine),
#: so the legend must tell them apart.
WAIT_HATCH = {True: "...", False: "///"}


def gantt(ops, ax=None, title=None, legend=True):
    """Draw ``ops`` as bars, one lane per stream. An op whose start was
    measured (a kernel's own clock) is a solid bar with a black tick at its
    start; an op whose start was inferred is a lighter bar with a dashed
    edge. The time between its stream reaching an op and its start is
    hatched, differently for a measured and an inferred start
    (`WAIT_HATCH`). The legend (`legend_handles`) says which is which, and
    names the assumption behind inferred starts (`INFERRED_LABEL`); with
    ``legend=False`` there is none, for a figure of several timelines
    that draws one for all of them (`figure_legend`)."""
    import matplotlib.pyplot as plt
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.6 * len(lanes(ops)) + 1.2))
    rows = lanes(ops)
    for op in ops:
        row = rows.index(op.lane)
        y = (row - 0.35, 0.7)
        color = COLORS.get(op.label, "tab:gray")
        if op.start > op.ready:
            ax.broken_barh([(op.ready, op.start - op.ready)], y,
                           facecolors="none", edgecolors=color,
                           hatch=WAIT_HATCH[op.measured], linewidth=0)
        if op.measured:
            ax.broken_barh([(op.start, op.end - op.start)], y,
                           facecolors=color, edgecolors="white",
                           linewidth=0.5)
            ax.plot([op.start, op.start], [row - 0.35, row + 0.35],
                    color="black", linewidth=1.5)
        else:
            ax.broken_barh([(op.start, op.end - op.start)], y,
                           facecolors=color, alpha=INFERRED_ALPHA,
                           edgecolors=color, linestyles="--",
                           linewidth=0.8)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time since the first event (ms)")
    ax.set_xlim(0, makespan(ops) * 1.02)
    if legend:
        ax.legend(handles=legend_handles(ops), loc="upper left",
                  bbox_to_anchor=(1.01, 1), fontsize="small", frameon=False)
    if title:
        ax.set_title(title)
    return ax


def legend_handles(ops):
    """The legend entries for a timeline of ``ops``: a colour for each
    kind of operation drawn, then the marks for measured and inferred
    starts and for the waits that it shows."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    shown = list(dict.fromkeys(op.label for op in ops))
    handles = [Patch(color=COLORS.get(lb, "tab:gray"), label=lb)
               for lb in shown]
    if any(op.measured for op in ops):
        handles.append(Line2D([], [], color="black", linewidth=1.5,
                              label="start measured (kernel's clock)"))
    if any(not op.measured for op in ops):
        handles.append(Patch(facecolor="gray", alpha=INFERRED_ALPHA,
                             edgecolor="black", linestyle="--",
                             label=INFERRED_LABEL))
    if any(op.start > op.ready and not op.measured for op in ops):
        handles.append(Patch(facecolor="none", edgecolor="black",
                             hatch=WAIT_HATCH[False],
                             label="inferred wait for its engine or link"))
    if any(op.start > op.ready and op.measured for op in ops):
        handles.append(Patch(facecolor="none", edgecolor="black",
                             hatch=WAIT_HATCH[True],
                             label="measured wait: reached, not started"))
    return handles


def figure_legend(fig, *ops_lists, ncol=2):
    """One legend under a figure of several timelines (each drawn with
    ``gantt(..., legend=False)``): every entry any of ``ops_lists`` needs,
    once, the kinds of operation first, in the figure's own font size.
    The figure needs ``layout="constrained"``, which makes room for it."""
    entries = {}
    for ops in ops_lists:
        for handle in legend_handles(ops):
            entries.setdefault(handle.get_label(), handle)
    kinds = [entries.pop(k) for k in list(entries) if k in COLORS]
    return fig.legend(handles=kinds + list(entries.values()),
                      loc="outside lower center", ncol=ncol, frameon=False)


def chrome_trace(ops, process="GPU"):
    """``ops`` in the Trace Event format: one thread per lane, "X" (complete)
    events with ``ts`` and ``dur`` in microseconds, waits as their own
    events, and in each op's ``args`` whether its start was measured or
    inferred; Perfetto and chrome://tracing open it."""
    rows = lanes(ops)
    events = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
               "args": {"name": process}}]
    for tid, lane in enumerate(rows):
        events.append({"name": "thread_name", "ph": "M", "pid": 0,
                       "tid": tid, "args": {"name": lane}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 0,
                       "tid": tid, "args": {"sort_index": tid}})
    for op in ops:
        tid = rows.index(op.lane)
        if op.start > op.ready:
            events.append({"name": f"wait for engine or link ({op.name})"
                           if not op.measured else f"wait ({op.name})",
                           "cat": "wait", "ph": "X", "pid": 0, "tid": tid,
                           "ts": op.ready * 1e3,
                           "dur": (op.start - op.ready) * 1e3})
        events.append({"name": op.name, "cat": op.label, "ph": "X",
                       "pid": 0, "tid": tid, "ts": op.start * 1e3,
                       "dur": (op.end - op.start) * 1e3,
                       "args": {"engine": ENGINES.get(op.label, "none"),
                                "start": "measured" if op.measured
                                else "inferred"}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def save_chrome_trace(ops, path, process="GPU"):
    """Write `chrome_trace` of ``ops`` to ``path`` as JSON; return ``path``."""
    with open(path, "w") as f:
        json.dump(chrome_trace(ops, process), f)
    return path
