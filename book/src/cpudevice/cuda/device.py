"""``cupy.cuda.Device`` and the per-device state of the CPU device model.

Each virtual device has a memory capacity, a compute engine and one copy
engine per direction (locks that work must hold while it runs), and a legacy
null stream. Nothing is created until the device is first used.
"""
import threading

from . import runtime


class _DeviceState:
    """What one virtual device owns: engines, capacity, its null queue."""

    def __init__(self, device_id):
        self.id = device_id
        self.capacity = runtime._CAPACITY
        self.reserved = 0                 # bytes held by pools on the device
        self.lock = threading.Lock()
        self.compute = threading.Lock()   # kernels run one at a time
        self.h2d = threading.Lock()       # copy engine, host to device
        self.d2h = threading.Lock()       # copy engine, device to host
        self.blocking_queues = set()      # queues that sync with legacy null
        self._null = None

    @property
    def null_queue(self):
        if self._null is None:
            from .stream import _Queue
            with self.lock:
                if self._null is None:
                    self._null = _Queue(self, "null", legacy=True)
        return self._null

    def reserve(self, nbytes):
        """Take ``nbytes`` of device memory; False when it does not fit."""
        with self.lock:
            if self.reserved + nbytes > self.capacity:
                return False
            self.reserved += nbytes
            return True

    def release(self, nbytes):
        with self.lock:
            self.reserved -= nbytes

    def queues(self):
        """Every live queue of this device: null, blocking, non-blocking."""
        from .stream import _all_queues
        return [q for q in list(_all_queues) if q.dev is self]

    def synchronize(self):
        """Wait for every queue of the device (cudaDeviceSynchronize)."""
        for q in self.queues():
            q.host_wait(q.enqueued)


_states = {}
_states_lock = threading.Lock()


def _state(device_id):
    device_id = runtime._check(device_id)
    st = _states.get(device_id)
    if st is None:
        with _states_lock:
            st = _states.setdefault(device_id, _DeviceState(device_id))
    return st


def _initialized(device_id):
    """True once the device has been used (the lazy start-up has happened)."""
    return device_id in _states


class Device:
    """A device, and a context manager that makes it the current one."""

    def __init__(self, device=None):
        if device is None:
            self.id = runtime.getDevice()
        else:
            self.id = int(device)
        self._stack = []

    def __int__(self):
        return self.id

    def __index__(self):
        return self.id

    def __enter__(self):
        prev = runtime.getDevice()
        runtime.setDevice(self.id)
        self._stack.append(prev)
        return self

    def __exit__(self, *args):
        runtime.setDevice(self._stack.pop())

    def __repr__(self):
        return f"<CUDA Device {self.id}>"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("Device", self.id))

    def use(self):
        runtime.setDevice(self.id)

    def synchronize(self):
        _state(self.id).synchronize()

    @property
    def compute_capability(self):
        p = runtime.getDeviceProperties(self.id)
        return f"{p['major']}{p['minor']}"

    @property
    def mem_info(self):
        st = _state(self.id)
        return st.capacity - st.reserved, st.capacity


def get_device_id():
    return runtime.getDevice()
