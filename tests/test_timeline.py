"""Timelines: events around each op, engine starts, Gantt lanes, Chrome trace.

The trace is checked against a small JSON schema of the Trace Event format
(the JSON Object Format that Perfetto and chrome://tracing read): a
``traceEvents`` array whose events carry ``name``, ``ph``, ``pid`` and
``tid``; complete ("X") events also ``ts`` and ``dur`` in microseconds;
metadata ("M") events one of the metadata names and their ``args``.
"""
import json
import time

import jsonschema
import matplotlib
import numpy as np
import pytest

from modelkit import Gate, compute_engine_busy, timeline_slots, wait_until
from src import BACKEND, cp, cpx, kernels, timeline
from src.timeline import Op, Timeline

matplotlib.use("Agg")

TRACE_EVENT_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["traceEvents"],
    "properties": {
        "traceEvents": {"type": "array", "items": {"$ref": "#/$defs/event"}},
        "displayTimeUnit": {"enum": ["ms", "ns"]},
    },
    "$defs": {
        "event": {
            "type": "object",
            "required": ["name", "ph", "pid", "tid"],
            "properties": {
                "name": {"type": "string"},
                "cat": {"type": "string"},
                "ph": {"enum": ["B", "E", "X", "i", "I", "C", "b", "n", "e",
                                "s", "t", "f", "P", "N", "O", "D", "M",
                                "V", "v", "R", "c", "(", ")"]},
                "ts": {"type": "number", "minimum": 0},
                "dur": {"type": "number", "minimum": 0},
                "pid": {"type": "integer"},
                "tid": {"type": "integer"},
                "args": {"type": "object"},
            },
            "allOf": [
                {"if": {"properties": {"ph": {"const": "X"}}},
                 "then": {"required": ["ts", "dur"]}},
                {"if": {"properties": {"ph": {"const": "M"}}},
                 "then": {"required": ["args"],
                          "properties": {"name": {"enum": [
                              "process_name", "process_labels",
                              "process_sort_index", "thread_name",
                              "thread_sort_index"]}}}},
            ],
        },
    },
}


def op(lane, label, ready, end, name=None):
    return Op(lane, label, name or label, ready, 0.0, end)


def hold_compute_engine(gate, stream):
    """Queue a kernel on ``stream`` that holds the compute engine until
    ``gate`` opens, and return once it holds it."""
    gate.hold_engine(stream)
    assert wait_until(compute_engine_busy)
    time.sleep(0.05)                # past the zeros(1) queued before it


def timeline_with_the_engine_held(gate, a, b):
    """A timeline of streams ``a`` and ``b`` whose first op, a kernel on
    ``a``, holds the compute engine until ``gate`` opens; and an event on
    ``b``, done when ``b`` reaches the op queued next on it."""
    tl = Timeline([a, b])
    with tl.op(a, "kernel"):
        hold_compute_engine(gate, a)
    return tl, b.record()


model_only = pytest.mark.skipif(
    BACKEND == "gpu", reason="assumes the CPU device model's single compute "
    "engine, which runs one kernel at a time and can be held by a gate; a "
    "GPU runs kernels from several streams concurrently (concurrentKernels)")


def streams(n):
    return [cp.cuda.Stream(non_blocking=True) for _ in range(n)]


def one_stream_after_an_upload():
    """A stream, pinned and device arrays of 64 Ki floats, and a timeline
    of the stream with an "H2D" op of the host array already in it."""
    (s,) = streams(1)
    host = cpx.zeros_pinned(1 << 16, np.float32)
    dev = cp.empty(1 << 16, cp.float32)
    tl = Timeline([s])
    with tl.op(s, "H2D"):
        dev.set(host, stream=s)
    return s, host, dev, tl


# --- measured on the device ---------------------------------------------------

@pytest.mark.timeout(60)
def test_ops_on_one_stream_follow_each_other_in_issue_order():
    s, host, dev, tl = one_stream_after_an_upload()
    with tl.op(s, "kernel"):
        with s:
            dev += 1
    with tl.op(s, "D2H"):
        dev.get(stream=s, out=host, blocking=False)
    ops = tl.ops()
    assert [o.label for o in ops] == ["H2D", "kernel", "D2H"]
    assert all(o.lane == "stream 0" for o in ops)
    assert 0 <= ops[0].ready
    for before, after in zip(ops, ops[1:]):
        assert before.end <= after.ready <= after.start <= after.end
    assert (host == 1).all()


@model_only
@pytest.mark.timeout(60)
def test_a_copy_overlaps_a_kernel_on_another_stream():
    a, b = streams(2)
    host = cpx.zeros_pinned(1 << 16, np.float32)
    dev = cp.empty(1 << 16, cp.float32)
    gate = Gate()
    tl = Timeline([a, b])
    with tl.op(a, "kernel"):
        hold_compute_engine(gate, a)   # the kernel runs until the gate opens
    with tl.op(b, "H2D"):
        dev.set(host, stream=b)
    b.synchronize()                    # the copy finished while the kernel ran
    gate.open()
    kernel, copy = tl.ops()
    assert kernel.start <= copy.start and copy.end <= kernel.end


@model_only
@pytest.mark.timeout(60)
def test_a_kernel_waiting_for_the_compute_engine_starts_when_it_is_free():
    a, b = streams(2)
    gate = Gate()
    tl, reached = timeline_with_the_engine_held(gate, a, b)
    with tl.op(b, "kernel"):
        with b:
            cp.ones(8) * 2
    assert wait_until(lambda: reached.done)      # b reached its kernel
    time.sleep(0.02)
    gate.open()
    first, second = tl.ops()
    assert second.ready < first.end              # ready while engine busy
    assert second.start == first.end             # ... started when it freed
    raw = tl.ops(engines={})                     # without engine inference
    assert raw[1].start == raw[1].ready


@pytest.mark.timeout(60)
def test_the_books_kernels_measure_their_start_other_ops_infer_it():
    s, host, dev, tl = one_stream_after_an_upload()
    with tl.op(s, "kernel"):
        kernels.launch_overlap(dev, 0, dev.size, stream=s)
    with tl.op(s, "kernel", "CuPy's kernel"):
        with s:
            dev *= 1                 # CuPy's own kernel: no stamps
    copy, mine, cupys = tl.ops()
    assert not copy.measured and mine.measured and not cupys.measured
    assert copy.end <= mine.ready <= mine.start <= mine.end
    assert timeline.inferred(tl.ops()) == [copy, cupys]


@pytest.mark.timeout(60)
def test_a_stamp_pair_no_kernel_wrote_leaves_the_start_inferred():
    # An op can take its pair (a stamping kernel asked for it) and still
    # have nothing write it, e.g. a launch that failed: the pair keeps
    # NEVER as its start, and the op's start is inferred, not read from it.
    s, host, dev, tl = one_stream_after_an_upload()
    with tl.op(s, "kernel", "asked, never launched"):
        assert kernels.active_stamps() is not None
    (_, op) = tl.ops()
    assert not op.measured
    assert op.ready <= op.start <= op.end


@model_only
@pytest.mark.timeout(60)
def test_a_measured_start_is_when_the_kernel_got_the_engine():
    # On the model one kernel runs at a time: the book's kernel, ready
    # while another holds the engine, starts (and stamps) when it frees.
    a, b = streams(2)
    dev = cp.zeros(1 << 12, cp.float32)
    gate = Gate()
    tl, reached = timeline_with_the_engine_held(gate, a, b)
    with tl.op(b, "kernel"):
        kernels.launch_overlap(dev, 0, dev.size, stream=b)
    assert wait_until(lambda: reached.done)
    time.sleep(0.05)
    gate.open()
    first, second = tl.ops(engines={})           # no inference at all
    assert not first.measured and second.measured
    assert second.ready < first.end - 0.04       # ready well before ...
    assert second.start >= first.end - 0.5       # ... started when freed


@model_only
@pytest.mark.timeout(60)
def test_a_measured_start_on_an_idle_stream_lands_between_its_events():
    # The origin's stamp and the origin event mark one moment (the stamp
    # kernel still runs when the host records the event), so a kernel's
    # own stamp lands on the events' axis: on an idle stream, no earlier
    # than the stream reached it and no later than the host took to issue
    # it (plus a launch latency).
    (s,) = streams(1)
    dev = cp.zeros(1 << 12, cp.float32)
    kernels.launch_overlap(dev, 0, dev.size, stream=s)      # loaded
    s.synchronize()
    tl = Timeline([s])
    time.sleep(0.01)                 # the stream is idle, the host is slow
    t0 = time.perf_counter()
    with tl.op(s, "kernel"):
        kernels.launch_overlap(dev, 0, dev.size, stream=s)
    host_ms = (time.perf_counter() - t0) * 1e3
    (op,) = tl.ops()
    assert op.measured
    assert op.ready <= op.start <= op.ready + host_ms + 0.05


@pytest.mark.timeout(60)
def test_a_timeline_stamps_more_kernels_than_one_buffer_holds():
    a, b = streams(2)
    dev = cp.zeros(256, cp.float32)
    tl = Timeline([a, b])
    n = timeline_slots() + 20
    for i in range(n):
        s = (a, b)[i % 2]
        with tl.op(s, "kernel"):
            kernels.launch_overlap(dev, 0, 256, stream=s)
    ops = tl.ops()
    assert len(ops) == n and all(o.measured for o in ops)
    assert all(o.ready <= o.start <= o.end for o in ops)


def test_an_op_on_a_stream_not_on_the_timeline_is_refused():
    a, b = streams(2)
    tl = Timeline([a])
    with pytest.raises(ValueError, match="not on the timeline"):
        with tl.op(b, "kernel"):
            pass


def test_the_default_stream_gets_its_own_lane_name():
    tl = Timeline([cp.cuda.Stream.null])
    with tl.op(cp.cuda.Stream.null, "kernel"):
        cp.ones(4) + 1
    assert tl.ops()[0].lane == "default stream"


# --- engine starts, replay, totals ----------------------------------------------

def test_engine_inference_runs_each_engines_ops_one_at_a_time():
    ops = timeline.on_engines([
        op("s0", "kernel", 0, 10), op("s1", "kernel", 1, 14),
        op("s2", "H2D", 1, 3), op("s3", "kernel", 2, 20)])
    assert [o.start for o in ops] == [0, 10, 1, 14]


def test_engine_inference_never_starts_an_op_after_it_ended():
    ops = timeline.on_engines([op("s0", "kernel", 0, 10),
                               op("s1", "kernel", 9.9999, 10)])
    assert ops[1].start <= ops[1].end


def test_engine_inference_keeps_measured_starts():
    ops = timeline.on_engines([
        op("s0", "kernel", 0, 10),
        Op("s1", "kernel", "k", 1, 2, 9, measured=True),
        op("s2", "kernel", 3, 12)])
    # the measured op keeps its start and, finishing first, held the
    # engine until 9 as far as the inference (one op at a time) goes
    assert [o.start for o in ops] == [9, 2, 10]
    assert [o.measured for o in ops] == [False, True, False]


def test_ops_without_an_engine_start_when_ready():
    ops = timeline.on_engines([op("s0", "kernel", 0, 10),
                               op("s1", "wait", 1, 12)])
    assert ops[1].start == 1


def measured(order):
    """V1 or V2 order of 2 chunks: H2D 1 ms, kernel 2 ms, D2H 1 ms each."""
    dur = {"H2D": 1, "kernel": 2, "D2H": 1}
    stages = [(c, lb) for c in range(2) for lb in dur] if order == "v1" \
        else [(c, lb) for lb in dur for c in range(2)]
    return [Op(f"s{c}", lb, f"{lb} {c}", 0, 0, dur[lb]) for c, lb in stages]


def test_replay_with_one_copy_engine_serializes_v1_but_not_v2():
    one_copy = {"H2D": "copy", "D2H": "copy", "kernel": "compute"}
    v1 = timeline.replay(measured("v1"), one_copy)
    v2 = timeline.replay(measured("v2"), one_copy)
    assert timeline.makespan(v1) == 8      # nothing overlaps
    assert timeline.makespan(v2) == 6      # H2D 1 hides under kernel 0
    h2d_1 = next(o for o in v1 if o.name == "H2D 1")
    assert h2d_1.start == 4 and h2d_1.ready == 0   # behind D2H 0


def test_replay_with_two_copy_engines_overlaps_both_orders():
    for order in ("v1", "v2"):
        ops = timeline.replay(measured(order), timeline.ENGINES)
        assert timeline.makespan(ops) == 6


def test_busy_is_the_union_of_overlapping_ops_work_their_sum():
    ops = [Op("s0", "kernel", "a", 0, 0, 4, True),
           Op("s1", "kernel", "b", 0, 1, 5, True),     # overlaps a
           Op("s2", "kernel", "c", 0, 7, 8, True),
           Op("s0", "H2D", "d", 0, 2, 3)]
    assert timeline.busy(ops, "kernel") == 6        # [0, 5] and [7, 8]
    assert timeline.work(ops, "kernel") == 9
    assert timeline.busy(ops, "D2H") == timeline.work(ops, "D2H") == 0


def test_replayed_starts_are_inferred():
    ops = [Op("s0", "kernel", "k", 0, 1, 3, True)]
    assert not timeline.replay(ops, timeline.ENGINES)[0].measured


def test_busy_sums_engine_time_not_waiting_time():
    ops = [Op("s0", "H2D", "a", 0, 1, 3), Op("s1", "H2D", "b", 0, 3, 4),
           Op("s0", "kernel", "k", 3, 3, 9)]
    assert timeline.busy(ops, "H2D") == 3
    assert timeline.busy(ops, "kernel") == 6
    assert timeline.makespan(ops) == 9


# --- pictures and traces ----------------------------------------------------------

OPS = [Op("stream 0", "H2D", "H2D 0", 0.0, 0.0, 1.5),
       Op("stream 0", "kernel", "kernel 0", 1.5, 1.5, 4.0),
       Op("stream 1", "H2D", "H2D 1", 0.1, 1.5, 2.5),
       Op("stream 1", "kernel", "kernel 1", 2.5, 4.0, 6.0)]


def test_gantt_draws_one_lane_per_stream_and_hatches_waits():
    ax = timeline.gantt(OPS, title="t")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["stream 0",
                                                            "stream 1"]
    hatched = [c for c in ax.collections if c.get_hatch()]
    assert len(hatched) == 2                   # two ops waited
    assert "ms" in ax.get_xlabel()
    matplotlib.pyplot.close(ax.figure)


def test_gantt_gives_each_lane_one_unit_first_lane_on_top():
    """Rows 0..n-1 each span [row - 0.5, row + 0.5]: the y range is
    exactly the lanes, inverted so that the first stream is on top, with
    no blank band below the last lane."""
    ax = timeline.gantt(OPS)
    assert ax.get_ylim() == (1.5, -0.5)
    matplotlib.pyplot.close(ax.figure)


def legend_texts(ax):
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_gantt_says_which_starts_are_inferred_and_which_measured():
    ax = timeline.gantt(OPS)
    assert timeline.INFERRED_LABEL in legend_texts(ax)
    assert not any("measured (" in t for t in legend_texts(ax))
    bars = [c for c in ax.collections if not c.get_hatch()]
    assert all(c.get_alpha() == timeline.INFERRED_ALPHA for c in bars)
    matplotlib.pyplot.close(ax.figure)
    mixed = [OPS[0], OPS[1]._replace(measured=True)]
    ax = timeline.gantt(mixed)
    (tick,) = ax.lines               # the measured start, inside its bar
    bar = [c for c in ax.collections if c.get_alpha() is None][0]
    (_, y0), (_, y1) = bar.get_paths()[0].get_extents().get_points()
    assert list(tick.get_xdata()) == [OPS[1].start] * 2
    assert sorted(tick.get_ydata()) == pytest.approx([y0, y1])
    texts = legend_texts(ax)
    assert "start measured (kernel's clock)" in texts
    assert timeline.INFERRED_LABEL in texts
    alphas = sorted(str(c.get_alpha()) for c in ax.collections)
    assert alphas == sorted(["None", str(timeline.INFERRED_ALPHA)])
    matplotlib.pyplot.close(ax.figure)


def test_gantt_names_a_measured_wait_only_where_a_measured_op_waited():
    """The legend's "measured wait" entry is for a measured op that was
    reached before it started; a measured op that started when reached,
    beside inferred ops that waited, gets only the inferred-wait entry."""
    measured_wait = "measured wait: reached, not started"
    inferred_wait = "inferred wait for its engine or link"
    ops = [OPS[0], OPS[1]._replace(measured=True), OPS[2]]  # OPS[2] waits
    ax = timeline.gantt(ops)
    texts = legend_texts(ax)
    assert inferred_wait in texts and measured_wait not in texts
    matplotlib.pyplot.close(ax.figure)
    ax = timeline.gantt([OPS[0], OPS[2]._replace(measured=True)])
    texts = legend_texts(ax)
    assert measured_wait in texts and inferred_wait not in texts
    matplotlib.pyplot.close(ax.figure)


def test_gantt_hatches_the_two_kinds_of_wait_differently():
    """A measured wait and an inferred one mean different things: their
    legend entries, and the bars, carry different hatches, and each bar's
    hatch is its legend entry's."""
    ops = [OPS[0], OPS[1], OPS[2], OPS[3]._replace(measured=True)]
    ax = timeline.gantt(ops)
    handles = ax.get_legend().legend_handles
    legend = {t.get_text(): getattr(h, "get_hatch", str)() for t, h in
              zip(ax.get_legend().get_texts(), handles)}
    measured = legend["measured wait: reached, not started"]
    inferred = legend["inferred wait for its engine or link"]
    assert measured and inferred and measured != inferred
    hatches = [c.get_hatch() for c in ax.collections if c.get_hatch()]
    assert sorted(hatches) == sorted([inferred, measured])
    matplotlib.pyplot.close(ax.figure)


def test_chrome_trace_follows_the_trace_event_format():
    trace = timeline.chrome_trace(OPS)
    jsonschema.Draft202012Validator.check_schema(TRACE_EVENT_SCHEMA)
    jsonschema.validate(trace, TRACE_EVENT_SCHEMA,
                        cls=jsonschema.Draft202012Validator)


def test_the_schema_rejects_a_complete_event_without_a_duration():
    bad = {"traceEvents": [{"name": "k", "ph": "X", "pid": 0, "tid": 0,
                            "ts": 1.0}]}
    with pytest.raises(jsonschema.ValidationError, match="dur"):
        jsonschema.validate(bad, TRACE_EVENT_SCHEMA,
                            cls=jsonschema.Draft202012Validator)


def test_chrome_trace_has_microseconds_and_a_named_thread_per_lane():
    events = timeline.chrome_trace(OPS, process="model")["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e["name"] == "thread_name"}
    assert names == {0: "stream 0", 1: "stream 1"}
    kernel_1 = next(e for e in events if e["name"] == "kernel 1")
    assert kernel_1 == {"name": "kernel 1", "cat": "kernel", "ph": "X",
                        "pid": 0, "tid": 1, "ts": 4000.0, "dur": 2000.0,
                        "args": {"engine": "compute engine",
                                 "start": "inferred"}}
    waits = [e for e in events if e.get("cat") == "wait"]
    assert [(w["ts"], w["dur"]) for w in waits] == [(100.0, 1400.0),
                                                   (2500.0, 1500.0)]


def test_chrome_trace_names_a_wait_inferred_or_measured():
    """An inferred start's wait is "wait for engine or link" (the inference's
    reason); a measured start's wait is only a wait: its cause is not
    known."""
    ops = [OPS[2], OPS[3]._replace(measured=True)]
    waits = [e["name"] for e in timeline.chrome_trace(ops)["traceEvents"]
             if e.get("cat") == "wait"]
    assert waits == ["wait for engine or link (H2D 1)", "wait (kernel 1)"]


def test_saved_trace_is_the_same_json(tmp_path):
    path = timeline.save_chrome_trace(OPS, tmp_path / "t.json")
    assert json.loads(path.read_text()) == timeline.chrome_trace(OPS)


def test_copies_in_one_direction_take_turns_on_the_link():
    """Two H2D copies on two streams that shared the link (an H100's three
    copy engines can keep both in flight; each then moves at half the
    rate): both reached at 0, one done at 2 ms, the other at 4 ms. The
    inference gives each the link time it had to itself, so the copies'
    durations add up to the time the link was busy, which is what the
    bounds (`pipeline.run_bound`, `gained`) need; the later copy is drawn
    as starting when the first ended. A copy out is on the other
    direction of the link, and does not wait for them."""
    ops = [timeline.Op("s1", "H2D", "H2D 0", 0.0, 0.0, 2.0),
           timeline.Op("s2", "H2D", "H2D 1", 0.0, 0.0, 4.0),
           timeline.Op("s3", "D2H", "D2H 0", 0.0, 0.0, 3.0)]
    got = timeline.on_engines(ops)
    assert [op.start for op in got] == [0.0, 2.0, 0.0]
    assert timeline.work(got, "H2D") == timeline.busy(got, "H2D") == 4.0
    assert timeline.ENGINES["H2D"] != timeline.ENGINES["D2H"]


def test_the_legend_names_the_assumption_behind_inferred_starts():
    assert "take turns on the link" in " ".join(
        timeline.INFERRED_LABEL.split())


def test_a_figure_of_several_timelines_has_one_legend_for_all():
    """Two panels drawn without their own legends share one under the
    figure: every entry either panel needs, once each, the kinds of
    operation first (D2H only in the second panel, a measured start only
    in the first)."""
    first = [OPS[0], OPS[1]._replace(measured=True)]
    second = [OPS[2], Op("stream 1", "D2H", "D2H 1", 2.5, 2.5, 3.0)]
    fig, axes = matplotlib.pyplot.subplots(2, 1, layout="constrained")
    timeline.gantt(first, ax=axes[0], legend=False)
    timeline.gantt(second, ax=axes[1], legend=False)
    assert axes[0].get_legend() is None and axes[1].get_legend() is None
    legend = timeline.figure_legend(fig, first, second)
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts[:3] == ["H2D", "kernel", "D2H"]
    assert sorted(texts[3:]) == sorted([
        "start measured (kernel's clock)", timeline.INFERRED_LABEL,
        "inferred wait for its engine or link"])
    matplotlib.pyplot.close(fig)
