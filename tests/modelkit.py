"""Test helpers for the CPU device model: gates that hold a stream or an
engine still, so that tests of ordering are deterministic, not timed."""
import threading

import numpy

import src.cpudevice as cp
from src import twins

WAIT_S = 20        # no wait in the tests lasts longer than this

_gates = {}


@twins.register("test_engine_gate", real_time=True)
def _engine_gate(x, key, y):
    """Holds the compute engine until the gate ``key`` opens."""
    if not _gates[int(key)].wait(WAIT_S):
        raise TimeoutError("gate never opened")
    numpy.copyto(y, x)


_kernel = cp.ElementwiseKernel("T x, int32 key", "T y", "y = x",
                               "test_engine_gate")


class Gate:
    """A closed gate in a stream (``hold_stream``) or on the compute engine
    (``hold_engine``); ``open()`` lets the work behind it run."""

    def __init__(self):
        self.event = threading.Event()
        self.key = len(_gates)
        _gates[self.key] = self.event

    def hold_stream(self, stream):
        stream.launch_host_func(lambda _: self.event.wait(WAIT_S), None)
        return self

    def hold_engine(self, stream):
        with stream:
            _kernel(cp.zeros(1), self.key)
        return self

    def open(self):
        self.event.set()


def wait_until(predicate, timeout=WAIT_S):
    """Poll ``predicate`` until it is true; False if ``timeout`` passes."""
    import time
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.002)
    return False


def open_all_gates():
    """Open every gate, so a failed test cannot hold later tests' work."""
    for event in _gates.values():
        event.set()
