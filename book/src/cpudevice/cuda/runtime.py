"""``cupy.cuda.runtime`` on the CPU device model: devices and their properties.

Errors carry CUDA's names and descriptions, as CuPy's ``CUDARuntimeError``
does (``"cudaErrorInvalidDevice: invalid device ordinal"``).
"""
import os
import threading

is_hip = False

errorInvalidValue = 1
errorMemoryAllocation = 2
errorInvalidDevice = 101
errorInvalidResourceHandle = 400
errorIllegalState = 401
errorNotReady = 600
errorStreamCaptureUnsupported = 900
errorStreamCaptureInvalidated = 901

_ERRORS = {
    errorInvalidValue: ("cudaErrorInvalidValue", "invalid argument"),
    errorMemoryAllocation: ("cudaErrorMemoryAllocation", "out of memory"),
    errorInvalidDevice: ("cudaErrorInvalidDevice", "invalid device ordinal"),
    errorInvalidResourceHandle: ("cudaErrorInvalidResourceHandle",
                                 "invalid resource handle"),
    errorIllegalState: ("cudaErrorIllegalState",
                        "the operation cannot be performed in the present "
                        "state"),
    errorNotReady: ("cudaErrorNotReady", "device not ready"),
    errorStreamCaptureUnsupported: (
        "cudaErrorStreamCaptureUnsupported",
        "operation not permitted when stream is capturing"),
    errorStreamCaptureInvalidated: (
        "cudaErrorStreamCaptureInvalidated",
        "operation failed due to a previous error during capture"),
}


class CUDARuntimeError(RuntimeError):
    """A CUDA runtime error, with CUDA's status code, name and description."""

    def __init__(self, status):
        self.status = status
        name, text = _ERRORS.get(status, ("cudaErrorUnknown", "unknown error"))
        super().__init__(f"{name}: {text}")

    def __reduce__(self):
        return (type(self), (self.status,))


def _error(status, hint):
    """A `CUDARuntimeError` (CuPy's signature) whose message adds a hint."""
    err = CUDARuntimeError(status)
    err.args = (f"{err.args[0]}. {hint}",)
    return err


def _parse_bytes(text):
    """``'2GiB'`` / ``'512MiB'`` / ``'1e9'`` -> bytes."""
    text = str(text).strip()
    units = {"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
             "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "B": 1}
    upper = text.upper()
    for unit, scale in units.items():
        if upper.endswith(unit):
            return int(float(text[:-len(unit)]) * scale)
    return int(float(text))


def _config():
    n = int(os.environ.get("BOOK_CPU_DEVICES", "2"))
    if n < 1:
        raise ValueError(f"BOOK_CPU_DEVICES={n}: need at least one device")
    mem = _parse_bytes(os.environ.get("BOOK_CPU_DEVICE_MEMORY", "1GiB"))
    if mem < 2**20:
        raise ValueError(f"BOOK_CPU_DEVICE_MEMORY={mem} bytes: need 1 MiB "
                         "or more")
    return n, mem


_N_DEVICES, _CAPACITY = _config()
_tls = threading.local()


def _check(device):
    device = int(device)
    if not 0 <= device < _N_DEVICES:
        raise _error(
            errorInvalidDevice,
            f"The CPU device model has {_N_DEVICES} device(s), ids 0 to "
            f"{_N_DEVICES - 1}; set BOOK_CPU_DEVICES for more.")
    return device


def getDeviceCount():
    return _N_DEVICES


def getDevice():
    return getattr(_tls, "device", 0)


def setDevice(device):
    _tls.device = _check(device)


def getDeviceProperties(device):
    """The device's properties under CuPy's (CUDA's) keys."""
    device = _check(device)
    cores = os.cpu_count() or 1
    return {
        "name": f"CPU device model {device}".encode(),
        "totalGlobalMem": _CAPACITY,
        "multiProcessorCount": cores,
        "asyncEngineCount": 2,        # one copy engine per direction
        "concurrentKernels": 0,       # kernels run one at a time
        "major": 0,                   # no CUDA compute capability
        "minor": 0,
        "warpSize": 1,
        "maxThreadsPerBlock": 1024,
        "sharedMemPerBlock": 48 * 1024,
        "clockRate": 0,
        "memoryClockRate": 0,
        "memoryBusWidth": 0,
        "l2CacheSize": 0,
        "integrated": 1,              # device memory is host RAM
        "canMapHostMemory": 1,
        "unifiedAddressing": 1,
        "pciBusID": 0,
        "pciDeviceID": device,
        "pciDomainID": 0,
    }


def memGetInfo():
    """``(free, total)`` bytes of the current device, as the device sees it."""
    from .device import _state
    dev = _state(getDevice())
    return dev.capacity - dev.reserved, dev.capacity


def deviceSynchronize():
    from .device import _state
    _state(getDevice()).synchronize()


def deviceCanAccessPeer(device, peerDevice):
    """Peer access is not modelled: arrays move between devices by copies."""
    _check(device)
    _check(peerDevice)
    return 0


def runtimeGetVersion():
    return 0


def driverGetVersion():
    return 0
