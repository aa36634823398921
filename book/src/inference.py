"""Bounded inference (chapter 4): read each step's result back on a stream
of its own, into pinned memory, with the host at most ``k`` steps ahead.

Reading a result with a plain ``.get()`` on the stream that computed it
waits for everything queued there, the steps after it too, so nothing is
left in flight. Here the read waits for its own step only (an event), the
copy lands in one of ``k + 1`` pinned buffers without the host waiting,
and the host waits for the copy ``k`` steps back: ``k`` steps stay queued
on the device while it reads.
"""
from collections import deque

import numpy as np

from . import cp, cpx
from .memory import MemoryMonitor


def queue_read(out, buf, reader):
    """Queue, on the stream ``reader``, the copy of the classes of ``out``
    (a step just queued on the current stream) into the pinned array
    ``buf``; return ``(out, buf, the step's event, the copy's event)``."""
    computed = cp.cuda.get_current_stream().record()
    reader.wait_event(computed)          # the read waits for this step only
    with reader:
        best = out.argmax(axis=1)        # the classes, on the reader
    best.get(stream=reader, out=buf, blocking=False)   # the host goes on
    return out, buf, computed, reader.record()


def read_oldest(steps, in_flight):
    """Wait for the copy of the oldest step in ``steps`` and return its
    classes; append to ``in_flight`` how many later steps were still
    running on the device at that moment."""
    _, buf, _, copied = steps[0]
    copied.synchronize()                 # back-pressure; buf is ready now
    steps.popleft()                      # the reader is done with its out
    in_flight.append(sum(not step[2].done for step in steps))
    return buf.copy()                    # buf will take another step's copy


def infer(predict, batches, k=None):
    """Predict every batch, with the host at most ``k`` steps ahead of the
    results it has read (None: read them all at the end); return the
    classes, the peak bytes allocated, and the steps in flight at each
    read."""
    reader = cp.cuda.Stream(non_blocking=True)
    slots = len(batches) if k is None else k + 1
    pinned = [cpx.empty_pinned(len(batches[0]), np.int64)
              for _ in range(slots)]
    steps, classes, in_flight = deque(), [], []
    with MemoryMonitor(timeline=False) as mon:
        for i, batch in enumerate(batches):
            steps.append(queue_read(predict(batch), pinned[i % slots],
                                    reader))
            if k is not None and len(steps) > k:
                classes.append(read_oldest(steps, in_flight))
        while steps:
            classes.append(read_oldest(steps, in_flight))
    return (np.concatenate(classes),
            mon.peak_allocated - mon.start_allocated, in_flight)
