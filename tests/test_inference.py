"""src.inference: a bounded read leaves later steps in flight, tested with
gates that hold the steps' stream (not with timings).

A read that waited for more than its own step (a plain ``.get()`` on the
stream that computed the result, which waits for the whole stream) would
wait for a closed gate: the gate gives up after ``modelkit.WAIT_S``, the
steps then finish, and the count of steps in flight comes out 0."""
from collections import deque

import numpy as np
import pytest

import src
from modelkit import Gate
from src import cp, cpx
from src.inference import infer, queue_read, read_oldest

needs_model = pytest.mark.skipif(
    src.BACKEND != "cpu", reason="gates hold streams of the CPU device model")

ROWS, COLS = 8, 4096     # one output: 128 KiB, far more than a read allocates
OUT_BYTES = ROWS * COLS * 4


def host_batches(n):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((ROWS, COLS), dtype=np.float32)
            for _ in range(n)]


def double(batch):
    """A step: copy the batch in, queue one kernel (two arrays)."""
    return cp.asarray(batch) * 2


def gated(k, n):
    """A step like `double` whose work waits behind a gate of its own,
    which the host opens once it has queued the step ``k`` later: the
    device then runs exactly ``k`` steps behind the host. The last ``k``
    steps have no gate, so the reads at the end need no step after them."""
    gates, queued = [], []

    def predict(batch):
        i = len(queued)
        queued.append(i)
        if i >= k:
            gates[i - k].open()
        gate = Gate()
        gates.append(gate)
        if i < n - k:
            gate.hold_stream(cp.cuda.get_current_stream())
        return double(batch)
    return predict, gates


@needs_model
def test_a_read_waits_for_its_own_step_not_for_the_steps_after_it():
    reader = cp.cuda.Stream(non_blocking=True)
    bufs = [cpx.empty_pinned(ROWS, np.int64) for _ in range(3)]
    batches = host_batches(3)
    steps = deque([queue_read(double(batches[0]), bufs[0], reader)])
    gate = Gate().hold_stream(cp.cuda.get_current_stream())
    for batch, buf in zip(batches[1:], bufs[1:]):
        steps.append(queue_read(double(batch), buf, reader))
    in_flight = []
    try:
        classes = read_oldest(steps, in_flight)
        later_done = [step[2].done for step in steps]
    finally:
        gate.open()
    assert in_flight == [2] and later_done == [False, False]
    assert np.array_equal(classes, (batches[0] * 2).argmax(axis=1))
    assert [read_oldest(steps, in_flight).tolist() for _ in range(2)] == [
        (b * 2).argmax(axis=1).tolist() for b in batches[1:]]


@needs_model
def test_infer_reads_with_k_steps_in_flight(k=2):
    n = 2 * k + 2
    predict, gates = gated(k, n)
    batches = host_batches(n)
    try:
        classes, _, in_flight = infer(predict, batches, k)
    finally:
        for gate in gates:
            gate.open()
    # A read in the loop whose k later steps are all gated finds all k in
    # flight; the last reads may find the ungated steps done already.
    assert in_flight[:n - 2 * k] == [k] * (n - 2 * k)
    assert len(in_flight) == n and in_flight[-1] == 0
    assert np.array_equal(classes, np.concatenate(
        [(b * 2).argmax(axis=1) for b in batches]))


@pytest.mark.parametrize("k", [0, 1, 3])
def test_infer_keeps_k_outputs_and_one_steps_arrays(k):
    batches = host_batches(6)
    classes, peak, in_flight = infer(double, batches, k)
    assert peak == (k + 2) * OUT_BYTES      # k kept, the input, the output
    assert len(in_flight) == len(batches)
    assert np.array_equal(classes, np.concatenate(
        [(b * 2).argmax(axis=1) for b in batches]))


def test_infer_without_a_bound_reads_everything_at_the_end():
    batches = host_batches(5)
    classes, peak, in_flight = infer(double, batches)
    assert peak == (len(batches) + 1) * OUT_BYTES
    assert len(in_flight) == len(batches) and in_flight[-1] == 0
    assert np.array_equal(classes, np.concatenate(
        [(b * 2).argmax(axis=1) for b in batches]))
