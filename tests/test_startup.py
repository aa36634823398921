"""src.startup: timing the first operations of a fresh process."""
import pytest

import src
from src.startup import in_fresh_processes, time_first_ops


def test_time_first_ops_times_each_op_and_reads_the_pool():
    out = time_first_ops(n_ops=3, size=100)
    assert len(out["op_s"]) == 3
    assert all(t > 0 for t in out["op_s"])
    assert out["pool_bytes_after"] >= out["pool_bytes_before"]


def test_a_fresh_process_starts_with_an_empty_pool_on_this_backend():
    (run,) = in_fresh_processes(runs=1, n_ops=2, size=100)
    assert run["backend"] == src.BACKEND
    assert run["pool_bytes_before"] == 0
    assert run["pool_bytes_after"] > 0
    assert len(run["op_s"]) == 2
    assert run["import_s"] > 0


def test_a_failing_fresh_process_reports_its_error(monkeypatch):
    monkeypatch.setenv("BOOK_BACKEND", "tpu")
    with pytest.raises(RuntimeError, match="is not one of"):
        in_fresh_processes(runs=1, n_ops=1)
