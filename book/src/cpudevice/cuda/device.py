"""``cupy.cuda.Device`` on the CPU device model.

A device's state (memory, engines, its legacy null stream) belongs to the
simulated hardware (`src.cpudevice._hardware`); nothing is created until
the device is first used.
"""
import threading

from .. import _hardware
from . import runtime
from .runtime import _state


class _DeviceStackTLS(threading.local):
    def __init__(self):
        self.stack = []         # the device each open `with Device` left


_stack_tls = _DeviceStackTLS()


def _initialized(device_id):
    """True once the device has been used (the lazy start-up has happened)."""
    return _hardware.initialized(device_id)


class Device:
    """A device, and a context manager that makes it the current one."""

    def __init__(self, device=None):
        if device is None:
            self.id = runtime.getDevice()
        else:
            self.id = int(device)

    @classmethod
    def from_pci_bus_id(cls, pci_bus_id):
        """The device with PCI bus id ``pci_bus_id``
        (``domain:bus:device.function``, hexadecimal)."""
        return cls(runtime.deviceGetByPCIBusId(pci_bus_id))

    def __int__(self):
        return self.id

    def __index__(self):
        return self.id

    def __enter__(self):
        # The stack is the host thread's, as CuPy's: the same Device used in
        # `with` blocks by two threads restores each thread's own device.
        prev = runtime.getDevice()
        _stack_tls.stack.append(prev)
        if self.id != prev:
            runtime.setDevice(self.id)
        return self

    def __exit__(self, *args):
        runtime.setDevice(_stack_tls.stack.pop())

    def __repr__(self):
        return f"<CUDA Device {self.id}>"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("Device", self.id))

    def use(self):
        """Make this device current for the calling thread; returns it."""
        runtime.setDevice(self.id)
        return self

    def synchronize(self):
        _state(self.id).synchronize()
        _hardware.host_sleep(_hardware.profile.sync_s)   # the round trip

    @property
    def compute_capability(self):
        p = runtime.getDeviceProperties(self.id)
        return f"{p['major']}{p['minor']}"

    @property
    def pci_bus_id(self):
        """The device's PCI bus id, a str: ``domain:bus:device.function``
        in hexadecimal (``"0000:00:00.0"``), as CUDA writes it."""
        return runtime.deviceGetPCIBusId(self.id)

    @property
    def mem_info(self):
        st = _state(self.id)
        return st.capacity - st.reserved, st.capacity


def get_device_id():
    return runtime.getDevice()
