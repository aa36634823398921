"""``cupy.cuda.runtime`` on the CPU device model: devices and their properties.

Its errors (``CUDARuntimeError``, the status codes) come from `.._errors`,
at the bottom of the model, since the hardware raises them too. They carry
CUDA's names and descriptions, as CuPy's ``CUDARuntimeError`` does
(``"cudaErrorInvalidDevice: invalid device ordinal"``).
"""
import threading

from .. import _hardware
from .._errors import (  # noqa: F401  (cupy.cuda.runtime's names)
    CUDARuntimeError, _ERRORS, _error, errorInvalidValue,
    errorMemoryAllocation, errorInvalidDevice, errorInvalidResourceHandle,
    errorIllegalState, errorNotReady, errorStreamCaptureUnsupported,
    errorStreamCaptureInvalidated, errorStreamCaptureMerge,
    errorStreamCaptureUnmatched, errorStreamCaptureUnjoined,
    errorStreamCaptureIsolation, errorStreamCaptureImplicit,
    errorCapturedEvent, errorInitializationError, errorIllegalAddress)

is_hip = False

streamLegacy = 1            # the handles CUDA gives its two default streams
streamPerThread = 2
streamDefault = 0
streamNonBlocking = 1
streamCaptureModeGlobal = 0
streamCaptureModeThreadLocal = 1
streamCaptureModeRelaxed = 2
cudaCpuDeviceId = -1
cudaInvalidDeviceId = -2
cudaDevAttrManagedMemory = 83
cudaDevAttrConcurrentManagedAccess = 89
cudaDevAttrMemoryPoolsSupported = 115


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


def _state(device_id):
    """The device's state (`_hardware.DeviceState`), created on first use."""
    st = _hardware._states.get(device_id)
    if st is None:
        st = _hardware.state(_check(device_id))
    return st


def getDeviceCount():
    return _N_DEVICES


def getDevice():
    return _tls.device


def setDevice(device):
    _tls.device = _check(device)


# CuPy's keys (cupy_backends/cuda/api/runtime.pyx), in its order, with the
# values a device profile that lacks them gets; the profile's "properties"
# override them (profiles/h100.json holds the H100's own values).
_PROPERTY_DEFAULTS = {
    "name": b"",
    "totalGlobalMem": 0,
    "sharedMemPerBlock": 48 * 1024,
    "regsPerBlock": 65536,
    "warpSize": 32,
    "maxThreadsPerBlock": 1024,
    "maxThreadsDim": (1024, 1024, 64),
    "maxGridSize": (2147483647, 65535, 65535),
    "clockRate": 0,
    "totalConstMem": 65536,
    "major": 0,
    "minor": 0,
    "textureAlignment": 512,
    "texturePitchAlignment": 32,
    "multiProcessorCount": 1,
    "kernelExecTimeoutEnabled": 0,
    "integrated": 1,
    "canMapHostMemory": 1,
    "computeMode": 0,           # cudaComputeModeDefault
    "maxTexture1D": 131072,
    "maxTexture2D": (131072, 65536),
    "maxTexture3D": (16384, 16384, 16384),
    "concurrentKernels": 1,     # kernels may run concurrently
    "ECCEnabled": 0,
    "pciBusID": 0,
    "pciDeviceID": 0,
    "pciDomainID": 0,
    "tccDriver": 0,
    "memoryClockRate": 0,
    "memoryBusWidth": 0,
    "l2CacheSize": 0,
    "maxThreadsPerMultiProcessor": 2048,
    "isMultiGpuBoard": 0,
    "cooperativeLaunch": 1,
    "cooperativeMultiDeviceLaunch": 0,
    "asyncEngineCount": 2,      # one copy engine per direction
    "unifiedAddressing": 1,
    "streamPrioritiesSupported": 1,
    "globalL1CacheSupported": 1,
    "localL1CacheSupported": 1,
    "sharedMemPerMultiprocessor": 0,
    "regsPerMultiprocessor": 65536,
    "managedMemory": 1,
    "multiGpuBoardGroupID": 0,
    "hostNativeAtomicSupported": 0,
    "pageableMemoryAccess": 0,
    "concurrentManagedAccess": 1,
    "computePreemptionSupported": 1,
    "canUseHostPointerForRegisteredMem": 1,
    "sharedMemPerBlockOptin": 48 * 1024,
    "pageableMemoryAccessUsesHostPageTables": 0,
    "directManagedMemAccessFromHost": 0,
    "persistingL2CacheMaxSize": 0,
    "maxBlocksPerMultiProcessor": 32,
    "accessPolicyMaxWindowSize": 0,
    "reservedSharedMemPerBlock": 0,
}

# cudaDeviceGetAttribute's attributes that the model answers, and the keys
# of `getDeviceProperties` (or else of the profile's properties, default 1)
# that hold their values
_ATTRIBUTES = {cudaDevAttrManagedMemory: "managedMemory",
               cudaDevAttrConcurrentManagedAccess: "concurrentManagedAccess",
               cudaDevAttrMemoryPoolsSupported: "memoryPoolsSupported"}


def getDeviceProperties(device):
    """The device's properties under CuPy's (CUDA's) keys, from the device
    profile (`_hardware.profile`); memory from BOOK_CPU_DEVICE_MEMORY.
    Lists in the profile come back as tuples, as CuPy gives them."""
    device = _check(device)
    prof = _hardware.profile
    props = dict(_PROPERTY_DEFAULTS)
    props["name"] = f"CPU device model ({prof.name} profile)".encode()
    for key, value in prof.properties.items():
        props[key] = tuple(value) if isinstance(value, list) else value
    props.update({"totalGlobalMem": _CAPACITY,
                  "integrated": 1,    # device memory is host RAM
                  "pciBusID": 0,
                  "pciDeviceID": device, "pciDomainID": 0})
    return props


def deviceGetPCIBusId(device):
    """The device's PCI bus id as CUDA writes it, ``domain:bus:device.0``
    in hexadecimal (``"0000:00:00.0"``), from its properties."""
    props = getDeviceProperties(device)
    return "{:04X}:{:02X}:{:02X}.0".format(
        props["pciDomainID"], props["pciBusID"], props["pciDeviceID"])


def deviceGetByPCIBusId(pci_bus_id):
    """The device whose PCI bus id is ``pci_bus_id`` (a str; CUDA also
    takes a domain of 8 digits, and any case); cudaErrorInvalidValue if
    there is none."""
    if not isinstance(pci_bus_id, str):
        raise TypeError(f"Argument 'pci_bus_id' has incorrect type "
                        f"(expected str, got {type(pci_bus_id).__name__})")
    for device in range(_N_DEVICES):
        if _same_bus_id(pci_bus_id, deviceGetPCIBusId(device)):
            return device
    raise CUDARuntimeError(errorInvalidValue)


def _same_bus_id(a, b):
    """Whether two PCI bus ids name the same device: ``domain:bus:device
    .function`` in hexadecimal, whatever the case and the domain's width
    (CUDA writes 4 digits, NVML 8)."""
    def parts(text):
        try:
            head, function = text.strip().split(".")
            domain, bus, device = head.split(":")
            return tuple(int(v, 16) for v in (domain, bus, device, function))
        except ValueError:
            return None
    return parts(a) is not None and parts(a) == parts(b)


def deviceGetAttribute(attrib, device):
    """An attribute of the device, for those the model has (`_ATTRIBUTES`)."""
    key = _ATTRIBUTES.get(attrib)
    if key is None:
        raise _error(errorInvalidValue, f"the CPU device model does not "
                     f"answer device attribute {attrib}")
    props = getDeviceProperties(device)
    return int(props.get(key, _hardware.profile.properties.get(key, 1)))


def memGetInfo():
    """``(free, total)`` bytes of the current device, as the device sees it."""
    dev = _state(getDevice())
    return dev.capacity - dev.reserved, dev.capacity


def deviceSynchronize():
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
