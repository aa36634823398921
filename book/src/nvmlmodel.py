"""NVML on the CPU device model: the driver's view of the model's memory.

On a GPU, ``from src import nvml`` gives ``pynvml`` (the ``nvidia-ml-py``
package), NVIDIA's Python binding of the NVIDIA Management Library, which
reads the driver: what ``nvidia-smi`` prints. On the CPU device model it
gives this module, a stand-in with the same names for the part of pynvml
the book uses, reporting *modelled* numbers:

* a device's memory **used** is what the device's memory pools have
  reserved (what the model's ``memGetInfo()`` counts as used) plus
  `CONTEXT_BYTES` once the device has been used, for the CUDA context
  that a real process creates on a device's first use and that no pool
  ever sees;
* its **total** is the model's capacity (``totalGlobalMem``) plus
  `CONTEXT_BYTES`, so that, as on a GPU, the driver's free memory is the
  ``memGetInfo()`` free memory once the context exists, and the driver's
  total is larger than CUDA's;
* **free** is total minus used.

As in pynvml, every function but `nvmlInit` raises `NVMLError` (its
`NVMLError_Uninitialized` subclass) unless `nvmlInit` has been called more
often than `nvmlShutdown`; a bad device index raises
`NVMLError_InvalidArgument`, a PCI bus id of no device
`NVMLError_NotFound`. NVML numbers a machine's GPUs in PCI bus order and
ignores ``CUDA_VISIBLE_DEVICES``, so its index need not be CUDA's: the book
takes a handle by the device's PCI bus id (CuPy's ``Device.pci_bus_id``),
which names the same GPU in both. The model's devices are in PCI order
already, so both numberings agree here.
"""
import operator
import threading

from . import cpudevice

#: Bytes the CUDA context takes on a device once a process has used it, by
#: the model's declaration (not measured here): "a few hundred MiB", as on
#: the NVIDIA H100 of the book's reference run, where the device counted
#: about 530 MiB as used beyond what the pool held (chapter 2: 78.41 GiB
#: free of 79.18 GiB with 256 MiB of arrays alive).
CONTEXT_BYTES = 512 * 2**20

# pynvml's return codes and the version tag of the v2 memory struct
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
nvmlMemory_v2 = 0x02000028


class NVMLError(Exception):
    """An NVML error: ``value`` is NVML's return code. As in pynvml,
    ``NVMLError(code)`` makes the code's subclass
    (``NVMLError_Uninitialized`` for 1)."""

    _valClassMapping = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_ARGUMENT_VERSION_MISMATCH: "Argument Version Mismatch",
    }

    def __new__(cls, value):
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self):
        return self._errcode_to_string.get(
            self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other):
        return isinstance(other, NVMLError) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __reduce__(self):
        return (NVMLError, (self.value,))


def _error_class(code, name):
    """NVMLError's subclass for ``code``: ``NVMLError_<name>()`` is that
    error, whatever its arguments, as in pynvml."""
    def new(cls, *args):
        return NVMLError.__new__(cls, code)

    cls = type(f"NVMLError_{name}", (NVMLError,), {"__new__": new})
    NVMLError._valClassMapping[code] = cls
    return cls


NVMLError_Uninitialized = _error_class(NVML_ERROR_UNINITIALIZED,
                                       "Uninitialized")
NVMLError_InvalidArgument = _error_class(NVML_ERROR_INVALID_ARGUMENT,
                                         "InvalidArgument")
NVMLError_NotFound = _error_class(NVML_ERROR_NOT_FOUND, "NotFound")
NVMLError_ArgumentVersionMismatch = _error_class(
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ArgumentVersionMismatch")


class c_nvmlDevice_t:
    """A device handle (pynvml's is a ctypes pointer; this one holds the
    model's device index)."""

    __slots__ = ("_index",)

    def __init__(self, index):
        self._index = index

    def __repr__(self):
        return f"<nvmlDevice of CPU device model {self._index}>"

    def __eq__(self, other):
        return (isinstance(other, c_nvmlDevice_t)
                and other._index == self._index)

    def __hash__(self):
        return hash(("nvmlDevice", self._index))


class c_nvmlMemory_t:
    """Memory of a device in bytes: ``total``, ``free`` and ``used``."""

    _fields = ("total", "free", "used")

    def __init__(self, **values):
        for name in self._fields:
            setattr(self, name, values[name])

    def __repr__(self):
        inner = ", ".join(f"{n}: {getattr(self, n)}"
                          + ("" if n == "version" else " B")
                          for n in self._fields)
        return f"{type(self).__name__}({inner})"


class c_nvmlMemory_v2_t(c_nvmlMemory_t):
    """The v2 form: ``version`` and ``reserved`` (by the driver and
    firmware: none on the model) too."""

    _fields = ("version", "total", "reserved", "free", "used")


_lock = threading.Lock()
_refcount = 0


def _check_initialized():
    if _refcount <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)


def _index_of(handle):
    if not isinstance(handle, c_nvmlDevice_t):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return handle._index


def _context_exists(index):
    """True once the model's device ``index`` has been used (its lazy
    start-up is when a real process creates the CUDA context)."""
    initialized = getattr(cpudevice.cuda.device, "_initialized", None)
    return True if initialized is None else bool(initialized(index))


def nvmlInit():
    """Start NVML (count one more user, as pynvml does)."""
    global _refcount
    with _lock:
        _refcount += 1


def nvmlShutdown():
    """Stop NVML for one user; NVMLError_Uninitialized if none is left."""
    global _refcount
    with _lock:
        _check_initialized()
        _refcount -= 1


def nvmlDeviceGetCount():
    """The number of devices (the model's)."""
    _check_initialized()
    return cpudevice.cuda.runtime.getDeviceCount()


def nvmlDeviceGetHandleByIndex(index):
    """The handle of device ``index``; NVMLError_InvalidArgument if there
    is no such device."""
    index = operator.index(index)       # TypeError, as ctypes' c_uint
    _check_initialized()
    if not 0 <= index < cpudevice.cuda.runtime.getDeviceCount():
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return c_nvmlDevice_t(index)


def nvmlDeviceGetHandleByPciBusId(pciBusId):
    """The handle of the device at PCI bus id ``pciBusId`` (str or bytes,
    ``domain:bus:device.function`` in hexadecimal, the domain of 4 digits
    as CUDA writes it or 8 as NVML does); NVMLError_InvalidArgument if it
    is no bus id, NVMLError_NotFound if no device is there."""
    if isinstance(pciBusId, str):
        pciBusId = pciBusId.encode()
    if not isinstance(pciBusId, bytes):         # ctypes' c_char_p
        raise TypeError(f"bytes or integer address expected instead of "
                        f"{type(pciBusId).__name__} instance")
    _check_initialized()
    runtime = cpudevice.cuda.runtime
    text = pciBusId.decode(errors="replace")
    if not runtime._same_bus_id(text, text):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    for index in range(runtime.getDeviceCount()):
        if runtime._same_bus_id(text, runtime.deviceGetPCIBusId(index)):
            return c_nvmlDevice_t(index)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetName(handle):
    """The device's name, as text."""
    _check_initialized()
    props = cpudevice.cuda.runtime.getDeviceProperties(_index_of(handle))
    return props["name"].decode()


def nvmlDeviceGetMemoryInfo(handle, version=None):
    """The device's memory as the driver would count it (see the module's
    docstring): a `c_nvmlMemory_t`, or a `c_nvmlMemory_v2_t` when
    ``version`` is `nvmlMemory_v2`."""
    _check_initialized()
    index = _index_of(handle)
    if _context_exists(index):
        free, capacity = cpudevice.cuda.Device(index).mem_info
        used = capacity - free + CONTEXT_BYTES
    else:               # reading mem_info would start the device: don't
        props = cpudevice.cuda.runtime.getDeviceProperties(index)
        capacity, used = props["totalGlobalMem"], 0
    total = capacity + CONTEXT_BYTES
    if not version:
        return c_nvmlMemory_t(total=total, free=total - used, used=used)
    if version != nvmlMemory_v2:
        raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    return c_nvmlMemory_v2_t(version=version, total=total, reserved=0,
                             free=total - used, used=used)


__all__ = ["CONTEXT_BYTES", "NVMLError", "NVMLError_Uninitialized",
           "NVMLError_InvalidArgument", "NVMLError_ArgumentVersionMismatch",
           "nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount",
           "NVMLError_NotFound", "nvmlDeviceGetHandleByIndex",
           "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetName",
           "nvmlDeviceGetMemoryInfo", "nvmlMemory_v2"]
