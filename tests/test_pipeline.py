"""Chunked pipelines: chunks, V1/V2 issue orders, and results that do not
depend on how the work was cut up or spread over streams."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from src import cp, cpx, pipeline
from src.kernels import harmonic_energy
from src.timeline import Op, Timeline


@given(n=st.integers(1, 10_000), data=st.data())
def test_chunks_cover_every_element_once_in_near_equal_parts(n, data):
    n_chunks = data.draw(st.integers(1, min(n, 64)))
    parts = pipeline.chunks(n, n_chunks)
    assert len(parts) == n_chunks
    assert parts[0][0] == 0
    for (a, size), (b, _) in zip(parts, parts[1:]):
        assert a + size == b
    assert sum(size for _, size in parts) == n
    sizes = {size for _, size in parts}
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("n, n_chunks", [(4, 0), (4, 5)])
def test_chunks_refuses_impossible_cuts(n, n_chunks):
    with pytest.raises(ValueError, match="cannot cut"):
        pipeline.chunks(n, n_chunks)


@given(n_chunks=st.integers(1, 20), n_streams=st.integers(1, 6),
       n_stages=st.integers(1, 4), order=st.sampled_from(pipeline.ORDERS))
def test_issue_order_issues_each_stage_once_and_in_stage_order(
        n_chunks, n_streams, n_stages, order):
    pairs = pipeline.issue_order(n_chunks, n_streams, n_stages, order)
    assert sorted(pairs) == [(c, s) for c in range(n_chunks)
                             for s in range(n_stages)]
    for c in range(n_chunks):
        stages = [s for cc, s in pairs if cc == c]
        assert stages == list(range(n_stages))


def test_v1_is_depth_first_and_v2_breadth_first_per_round_of_streams():
    assert pipeline.issue_order(3, 2, 2, "v1") == [
        (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]
    assert pipeline.issue_order(3, 2, 2, "v2") == [
        (0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]


def test_an_unknown_order_is_refused():
    with pytest.raises(ValueError, match="v1"):
        pipeline.issue_order(2, 2, 3, "depth")


def test_chunk_c_runs_on_stream_c_modulo_the_number_of_streams():
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(3)]
    seen = []
    stages = {"kernel": lambda c, s: seen.append((c, streams.index(s)))}
    tl = Timeline(streams)
    pipeline.run(stages, 7, streams, "v2", tl)
    assert seen == [(c, c % 3) for c in range(7)]
    assert [op.lane for op in tl.ops()] == [f"stream {c % 3}"
                                            for c in range(7)]


def fresh(n):
    host = cpx.zeros_pinned(n, np.float32)
    return host, cp.empty(n, cp.float32)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("order", pipeline.ORDERS)
@pytest.mark.parametrize("n_streams, n_chunks", [(1, 3), (4, 4), (2, 7)])
def test_overlap_demo_adds_one_everywhere_in_any_order(order, n_streams,
                                                      n_chunks):
    host, dev = fresh(4099)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    ops = pipeline.measure(pipeline.overlap_stages(host, dev, n_chunks),
                           n_chunks, streams, order)
    assert len(ops) == 3 * n_chunks
    assert np.abs(host - 1).max() < 1e-6


@pytest.mark.timeout(60)
def test_sequential_is_one_chunk_on_the_default_stream():
    host, dev = fresh(1000)
    tl = Timeline([cp.cuda.Stream.null])
    pipeline.sequential(pipeline.overlap_stages(host, dev, 1), timeline=tl)
    ops = tl.ops()
    assert [(o.lane, o.name) for o in ops] == [
        ("default stream", "H2D 0"), ("default stream", "kernel 0"),
        ("default stream", "D2H 0")]
    assert np.abs(host - 1).max() < 1e-6


@pytest.mark.timeout(300)
@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 5000), n_streams=st.integers(1, 4),
       order=st.sampled_from(pipeline.ORDERS), data=st.data())
def test_chunked_energy_equals_the_whole_energy(n, n_streams, order, data):
    n_chunks = data.draw(st.integers(1, min(n, 12)))
    x = cpx.empty_pinned(n, np.float32)
    x[:] = np.random.default_rng(n).random(n, dtype=np.float32)
    whole = float(harmonic_energy(cp.asarray(x), 1.0, 0.5))
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(n_streams)]
    stages, partials = pipeline.energy_stages(x, 1.0, 0.5, n_chunks,
                                              n_streams)
    pipeline.run(stages, n_chunks, streams, order)
    for s in streams:
        s.synchronize()
    chunked = partials.get().sum(dtype=np.float64)
    assert chunked == pytest.approx(whole, rel=1e-6, abs=1e-30)


def test_ideal_speedup_is_total_work_over_the_busiest_engine():
    assert pipeline.ideal_speedup(3.0, 1.0) == pytest.approx(4 / 3)
    assert pipeline.ideal_speedup(2.0, 2.0) == 2.0
    assert pipeline.ideal_speedup(0.0, 5.0) == 1.0
    assert pipeline.ideal_speedup(1.0, 4.0, 1.0) == 1.5  # three engines


def test_ideal_speedup_with_kernels_running_side_by_side():
    # copy 2 ms, kernels 8 ms, at most 4 kernels at once: kernels need 2 ms
    assert pipeline.ideal_speedup(2.0, 8.0, at_once=(1, 4)) == 5.0
    assert pipeline.ideal_speedup(2.0, 8.0, at_once=(1, 1)) == \
        pipeline.ideal_speedup(2.0, 8.0)
    with pytest.raises(ValueError, match="one count >= 1"):
        pipeline.ideal_speedup(2.0, 8.0, at_once=(1,))
    with pytest.raises(ValueError, match="one count >= 1"):
        pipeline.ideal_speedup(2.0, 8.0, at_once=(1, 0))


def test_kernels_at_once_is_one_without_concurrent_kernels():
    concurrent = cp.cuda.runtime.getDeviceProperties(
        cp.cuda.runtime.getDevice())["concurrentKernels"]
    if not concurrent:                     # the model
        assert pipeline.kernels_at_once(1, 8) == 1
    assert pipeline.kernels_at_once(10**9, 8) == 1   # fills any device


def test_kernels_at_once_counts_what_fits_on_an_h100(monkeypatch):
    h100 = {"concurrentKernels": 1, "multiProcessorCount": 132,
            "maxThreadsPerMultiProcessor": 2048}
    monkeypatch.setattr(cp.cuda.runtime, "getDeviceProperties",
                        lambda device: h100)
    assert pipeline.kernels_at_once(512, 8) == 8          # one block each
    assert pipeline.kernels_at_once(256 * 512, 8) == 2    # 270,336 threads
    assert pipeline.kernels_at_once(4 << 20, 8) == 1
    assert pipeline.kernels_at_once(512, 3) == 3          # one per stream


def test_run_bound_holds_and_gained_is_work_over_time():
    ops = [Op("s0", "H2D", "h0", 0, 0, 2), Op("s0", "kernel", "k0", 2, 2, 6,
                                              True),
           Op("s1", "H2D", "h1", 0, 2, 4), Op("s1", "kernel", "k1", 4, 4, 8,
                                              True)]
    # work 4 + 8 = 12 in 8 ms; kernels busy [2, 8] = 6 ms, copies 4 ms
    assert pipeline.gained(ops) == 1.5
    assert pipeline.run_bound(ops) == 2.0
    assert pipeline.gained(ops) <= pipeline.run_bound(ops)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("order", pipeline.ORDERS)
def test_measured_runs_never_beat_their_run_bound(order):
    host, dev = fresh(1 << 16)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    ops = pipeline.measure(pipeline.overlap_stages(host, dev, 4), 4,
                           streams, order)
    kernels_ = [o for o in ops if o.label == "kernel"]
    assert all(o.measured for o in kernels_)
    assert not any(o.measured for o in ops if o.label != "kernel")
    assert pipeline.gained(ops) <= pipeline.run_bound(ops) + 1e-9


@pytest.mark.timeout(60)
def test_produce_and_consume_with_the_wait_sums_what_was_copied():
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = cp.cuda.Stream(non_blocking=True)
    ones = cpx.empty_pinned(1 << 12, dtype=cp.float32)
    ones[:] = 1
    earlier = cpx.zeros_pinned(1 << 16, dtype=cp.float32)
    with producer:
        d_earlier = cp.empty(earlier.size, dtype=cp.float32)
    total, ops = pipeline.produce_and_consume(producer, consumer, ones,
                                              earlier, d_earlier, wait=True)
    assert total == ones.size
    assert [op.name for op in ops] == ["earlier copy", "copy x in",
                                       "sum of x"]
    copy_in, summed = ops[1], ops[2]
    assert summed.ready >= copy_in.end - 1e-6   # B waited for A's copy
