"""Graphs on the CPU device model (`cupy.cuda.Graph`): a capture records
without running, a launch replays, and what a capture refuses."""
import pytest

import src.cpudevice as cp


def test_capture_records_without_running_and_launch_replays():
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.ones(4)
    x.get()
    with s:
        s.begin_capture()
        assert s.is_capturing()
        cp.add(x, x, out=x)
        g = s.end_capture()
    assert not s.is_capturing()
    assert x.get().tolist() == [1] * 4          # captured, not run
    for _ in range(3):
        g.launch(stream=s)
    s.synchronize()
    assert x.get().tolist() == [8] * 4


def test_capture_refuses_null_stream_and_host_sync():
    with pytest.raises(RuntimeError, match="cannot capture on the default"):
        cp.cuda.Stream.null.begin_capture()
    s = cp.cuda.Stream(non_blocking=True)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError):
        s.end_capture()
    x = cp.ones(2)
    with s:
        s.begin_capture()
        with pytest.raises(RuntimeError, match="capturing"):
            x.get()
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
            s.synchronize()
        assert e.value.status == 900
        with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
            s.end_capture()
        assert e.value.status == 901
