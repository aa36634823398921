"""Timelines of device work, measured with CUDA events, one lane per stream.

Each operation is bracketed by two events on its stream. The first is
stamped when the stream *reaches* the operation, which may be before the
engine that runs it (a copy engine or the compute engine) is free; the
second when the operation has finished. `Timeline` records them; `gantt`
draws them; `chrome_trace` exports them for Perfetto and chrome://tracing.
"""
import json
import math
from contextlib import contextmanager
from typing import NamedTuple

from . import cp
from .timing import EventTimer

# The engine each label runs on: one copy engine per direction and one for
# kernels, as on a GPU with asyncEngineCount == 2 (and the CPU device model).
ENGINES = {"H2D": "copy engine H2D", "kernel": "compute engine",
           "D2H": "copy engine D2H"}

COLORS = {"H2D": "tab:blue", "kernel": "tab:orange", "D2H": "tab:green"}


class Op(NamedTuple):
    """One operation, in milliseconds since the timeline's origin event."""
    lane: str       # the stream it was issued on
    label: str      # "H2D", "kernel", "D2H" (or any other label)
    name: str       # what to call it in a trace, e.g. "H2D 2"
    ready: float    # the stream reached it (its first event)
    start: float    # its engine began it (see `on_engines`)
    end: float      # it finished (its second event)


def _lane_name(stream, i):
    return "default stream" if stream.ptr == 0 else f"stream {i}"


class Timeline:
    """An `EventTimer` around each operation issued on ``streams``.

    An origin event is recorded on the first stream and every other stream
    waits for it, so that no operation can precede the origin.
    """

    def __init__(self, streams, names=None):
        self.streams = list(streams)
        self.names = list(names) if names is not None else [
            _lane_name(s, i) for i, s in enumerate(self.streams)]
        self.origin = self.streams[0].record()
        for s in self.streams[1:]:
            s.wait_event(self.origin)
        self._marks = []

    @contextmanager
    def op(self, stream, label, name=None):
        """Record the work queued in the ``with`` block on ``stream``."""
        if stream not in self.streams:
            raise ValueError("this stream is not on the timeline: pass it "
                             "to Timeline(streams) first")
        lane = self.names[self.streams.index(stream)]
        timer = EventTimer(stream)
        with timer:
            yield
        self._marks.append((lane, label, name or label, timer))

    def ops(self, engines=ENGINES):
        """The recorded operations (waits for them), in issue order."""
        raw = []
        for lane, label, name, timer in self._marks:
            timer.end.synchronize()
            raw.append(Op(lane, label, name, self._ms(timer.start), 0.0,
                          self._ms(timer.end)))
        return on_engines(raw, engines)

    def _ms(self, event):
        return cp.cuda.get_elapsed_time(self.origin, event)


def on_engines(ops, engines=ENGINES):
    """Set each op's ``start``: when its stream reached it *and* its engine
    was free. An engine runs one op at a time, so its ops ran in the order
    they finished; labels with no engine start when they are ready."""
    start = {}
    free = {}
    for i in sorted(range(len(ops)), key=lambda i: ops[i].end):
        op = ops[i]
        engine = engines.get(op.label)
        begin = max(op.ready, free.get(engine, -math.inf))
        start[i] = min(begin, op.end)
        if engine is not None:
            free[engine] = op.end
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
        out.append(op._replace(ready=ready, start=start, end=end))
    return out


def makespan(ops):
    """Milliseconds from the origin until the last op finished."""
    return max(op.end for op in ops)


def busy(ops, label):
    """Milliseconds the ops labelled ``label`` kept their engine busy."""
    return sum(op.end - op.start for op in ops if op.label == label)


def lanes(ops):
    """The lanes of ``ops``, in the order they first appear."""
    return list(dict.fromkeys(op.lane for op in ops))


def gantt(ops, ax=None, title=None):
    """Draw ``ops`` as bars, one lane per stream; the time an op waited for
    its engine after its stream reached it is hatched."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.6 * len(lanes(ops)) + 1.2))
    rows = lanes(ops)
    for op in ops:
        y = (rows.index(op.lane) - 0.35, 0.7)
        color = COLORS.get(op.label, "tab:gray")
        if op.start > op.ready:
            ax.broken_barh([(op.ready, op.start - op.ready)], y,
                           facecolors="none", edgecolors=color,
                           hatch="///", linewidth=0)
        ax.broken_barh([(op.start, op.end - op.start)], y,
                       facecolors=color, edgecolors="white", linewidth=0.5)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time since the first event (ms)")
    ax.set_xlim(0, makespan(ops) * 1.02)
    shown = list(dict.fromkeys(op.label for op in ops))
    handles = [Patch(color=COLORS.get(lb, "tab:gray"), label=lb)
               for lb in shown]
    if any(op.start > op.ready for op in ops):
        handles.append(Patch(facecolor="none", edgecolor="black",
                             hatch="///", label="waiting for its engine"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1),
              fontsize="small", frameon=False)
    if title:
        ax.set_title(title)
    return ax


def chrome_trace(ops, process="GPU"):
    """``ops`` in the Trace Event format: one thread per lane, "X" (complete)
    events with ``ts`` and ``dur`` in microseconds, waits as their own
    events; Perfetto and chrome://tracing open it."""
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
            events.append({"name": f"wait for engine ({op.name})",
                           "cat": "wait", "ph": "X", "pid": 0, "tid": tid,
                           "ts": op.ready * 1e3,
                           "dur": (op.start - op.ready) * 1e3})
        events.append({"name": op.name, "cat": op.label, "ph": "X",
                       "pid": 0, "tid": tid, "ts": op.start * 1e3,
                       "dur": (op.end - op.start) * 1e3,
                       "args": {"engine": ENGINES.get(op.label, "none")}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def save_chrome_trace(ops, path, process="GPU"):
    """Write `chrome_trace` of ``ops`` to ``path`` as JSON; return ``path``."""
    with open(path, "w") as f:
        json.dump(chrome_trace(ops, process), f)
    return path
