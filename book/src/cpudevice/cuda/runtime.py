"""``cupy.cuda.runtime`` on the CPU device model: devices and their properties.

Errors carry CUDA's names and descriptions, as CuPy's ``CUDARuntimeError``
does (``"cudaErrorInvalidDevice: invalid device ordinal"``).
"""
import threading

from .. import _hardware

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
    """CUDA's error for ``status``, with a sentence on what to do."""
    e = CUDARuntimeError(status)
    e.args = (f"{e.args[0]}. {hint}",)
    return e


_parse_bytes = _hardware._parse_bytes
_config = _hardware._config
_N_DEVICES, _CAPACITY = _hardware.N_DEVICES, _hardware.CAPACITY


class _DeviceTLS(threading.local):
    device = 0                  # the current device of this thread


_tls = _DeviceTLS()


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
    return _tls.device


def setDevice(device):
    _tls.device = _check(device)


def getDeviceProperties(device):
    """The device's properties under CuPy's (CUDA's) keys, from the device
    profile (`_hardware.profile`); memory from BOOK_CPU_DEVICE_MEMORY."""
    device = _check(device)
    prof = _hardware.profile
    props = {
        "name": f"CPU device model ({prof.name} profile)".encode(),
        "totalGlobalMem": _CAPACITY,
        "multiProcessorCount": 1,
        "asyncEngineCount": 2,        # one copy engine per direction
        "concurrentKernels": 1,       # kernels may run concurrently
        "major": 0,
        "minor": 0,
        "warpSize": 32,
        "maxThreadsPerBlock": 1024,
        "sharedMemPerBlock": 48 * 1024,
        "clockRate": 0,
        "memoryClockRate": 0,
        "memoryBusWidth": 0,
        "l2CacheSize": 0,
        "canMapHostMemory": 1,
        "unifiedAddressing": 1,
    }
    props.update(prof.properties)
    props.update({"totalGlobalMem": _CAPACITY,
                  "integrated": 1,    # device memory is host RAM
                  "pciBusID": 0,
                  "pciDeviceID": device, "pciDomainID": 0})
    return props


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
