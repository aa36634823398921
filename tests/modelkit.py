"""Test helpers for the CPU device model: gates that hold a stream or an
engine still, so that tests of ordering are deterministic, not timed; and
the probes, the one place where tests read the model's private state.

Tests never name a private (``_x``) of ``src`` themselves
(``tests/test_layout.py`` checks it): a test that needs one asks a probe
here, so that a change inside the model is mended in one file.
"""
import threading

import numpy

import src.cpudevice as cp
from src import nvmlmodel, timeline, twins
from src.cpudevice import _hardware as hardware   # noqa: F401  (a probe)
from src.cpudevice import _cub
from src.cpudevice.cuda import device as _device
from src.cpudevice.cuda import pinned_memory as _pinned

WAIT_S = 20        # no wait in the tests lasts longer than this


# -- probes: private state, read in one place --------------------------------

def device_initialized(device_id):
    """Has the device been started (its lazy start-up happened)?"""
    return _device._initialized(device_id)


def compute_engine_busy(device_id=0):
    """Is the device's compute engine held by a kernel right now?"""
    return _device._state(device_id).compute.locked()


def globaltimer_inside(start, end, reads=3):
    """What ``reads`` reads of ``%globaltimer`` give inside a booked item
    whose work spans ``[start, end]`` on the device clock (in seconds), as
    a stream's worker sets it up around the item's kernel twin."""
    from src.cpudevice._clock import _running
    _running.span = [start, end, 0]
    try:
        return [hardware.globaltimer_ns() for _ in range(reads)]
    finally:
        _running.span = None


def pinned_bytes_in_use():
    """Bytes of page-locked host memory allocated and not yet freed."""
    return _pinned._pinned_bytes_in_use()


def nvml_refcount():
    """How many ``nvmlInit`` calls the NVML model has not yet shut down."""
    return nvmlmodel._refcount


def staging_buffer_sizes():
    """Bytes of each bounce buffer the model keeps for pageable copies."""
    from src.cpudevice._copies import _staging
    with _staging.lock:
        return [b.nbytes for b in _staging.free]


def fresh_staging():
    """A new, empty set of the model's bounce buffers (``take``, ``give``,
    ``free``), apart from the one the copies use."""
    from src.cpudevice._copies import _Staging
    return _Staging()


def host_copy_calls(dst, src):
    """Copy ``src`` into ``dst`` as the model's host<->device copies do
    their real work (``_copies._copy``); return how many ``numpy.copyto``
    calls it made (one, or one per piece)."""
    import types
    from src.cpudevice import _copies
    calls = []

    def copyto(d, s):
        calls.append(d.nbytes)
        numpy.copyto(d, s)
    real = _copies.numpy
    _copies.numpy = types.SimpleNamespace(copyto=copyto, uint8=numpy.uint8)
    try:
        _copies._copy(dst, src)
    finally:
        _copies.numpy = real
    return len(calls)


def timeline_slots():
    """How many stamps one timeline buffer holds before it grows."""
    return timeline._SLOTS


def unregister_twin(name):
    """Remove the CPU twin registered under ``name`` (a test's own)."""
    twins._TWINS.pop(name)


def translated_variants(kernel):
    """How many dtype variants of an ElementwiseKernel have been translated."""
    return len(kernel._translated)


def nvidia_smi_fields(bus_id="0000:3B:00.0"):
    """What a reference's device record takes from ``nvidia-smi`` on a GPU
    (driver version, PCIe link) for the GPU at PCI bus id ``bus_id``:
    ``{}`` where it does not run."""
    from src.reference.machine import _nvidia_smi
    return _nvidia_smi(bus_id)


def model_profile():
    """``(path, data)`` of the CPU device model's profile, as a fresh
    process reads it (``BOOK_CPU_PROFILE`` or the default), and the
    default's path."""
    from src.cpudevice._profile import DEFAULT_PROFILE, Profile
    profile = Profile.load()
    return profile.path, profile.data, DEFAULT_PROFILE


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


# -- probes for tests/cpudevice/test_runtime.py -----------------------------
# Private state of the model, reached only through these small functions.
def open_queue_names():
    """Names of the model's stream queues that are not destroyed."""
    from src.cpudevice import _hardware
    return sorted(q.name for q in list(_hardware._all_queues)
                  if not q.closed)


def thread_ptds_queue_name(device_id=0):
    """The name of the calling thread's per-thread default queue."""
    from src.cpudevice.cuda.device import _state
    return _state(device_id).ptds_queue().name


def graph_node_count(graph):
    """How many nodes (kernels, copies, event marks) a graph recorded."""
    return len(graph._nodes)


def use_accelerators(monkeypatch, names):
    """Run the test as if CuPy had read ``CUPY_ACCELERATORS`` as ``names``
    (a list: ``["cub"]``, CuPy's default, or ``[]``)."""
    monkeypatch.setattr(_cub, "ACCELERATORS", list(names))


def accelerators():
    """The accelerators the model read from ``CUPY_ACCELERATORS``."""
    return _cub.ACCELERATORS


def parse_accelerators(text):
    """The model's reading of a ``CUPY_ACCELERATORS`` value."""
    return _cub._accelerators(text)


def cub_workspace(func, a, axis=None, dtype=None):
    """Bytes of CUB workspace the model takes for NumPy's reduction
    ``func`` of ``a`` (None: CuPy would not send it to CUB)."""
    return _cub._cub_workspace(func, a, axis, dtype)


def no_pool_malloc():
    """The allocator `set_allocator(None)` installs: cudaMalloc with no
    pool (CuPy's `cupy.cuda.memory._malloc`)."""
    return cp.cuda.memory._malloc


# -- probes for tests/cpudevice/test_interop.py -----------------------------

def cai_settings(monkeypatch, sync=None, export_version=None):
    """Run the test as if CuPy had read CUPY_CUDA_ARRAY_INTERFACE_SYNC
    (``sync``) and CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION; None: leave
    it (CuPy's ``cupy._util`` settings, read at each use)."""
    from src.cpudevice import _util
    if sync is not None:
        monkeypatch.setattr(_util, "CUDA_ARRAY_INTERFACE_SYNC", sync)
    if export_version is not None:
        monkeypatch.setattr(_util, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION",
                            export_version)


def dlpack_capsules_held():
    """How many DLPack capsules the model made that it still holds (with
    their arrays), until a consumer takes them or nothing else holds them."""
    from src.cpudevice import _dlpack
    with _dlpack._lock:
        return len(_dlpack._exported)

