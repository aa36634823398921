"""NVML as the book uses it: `src.nvml`, chosen by the backend, and the CPU
device model's stand-in for it (`src.nvmlmodel`).

The stand-in reports the model's memory as a driver would: what the
device's pools have reserved plus `CONTEXT_BYTES` for the CUDA context once
the device is in use. These tests drive the model itself
(`src.cpudevice`), whatever backend `src` chose, and check the stand-in's
numbers against the model's pool and ``memGetInfo``. Its names and
parameters are checked against pynvml's in test_contract.py.
"""
import sys

import pytest

import subproc
import src
import src.cpudevice as model
import src.nvmlmodel as nvml
from src.backend import choose_nvml

from modelkit import nvml_refcount

MiB = 2**20


@pytest.fixture
def started():
    """NVML started for the test and stopped after it, even on failure."""
    nvml.nvmlInit()
    yield nvml
    while nvml_refcount() > 0:
        nvml.nvmlShutdown()


@pytest.fixture
def pool():
    """The model's pool of device 0, with no idle blocks before and after."""
    with model.cuda.Device(0):
        pool = model.get_default_memory_pool()
        pool.free_all_blocks()
        yield pool
        pool.free_all_blocks()


def device_used(device=0):
    """What the model's device counts as used (memGetInfo: total - free)."""
    free, total = model.cuda.Device(device).mem_info
    return total - free


# --- starting and stopping -------------------------------------------------

def test_every_call_before_nvmlInit_raises_uninitialized():
    assert nvml_refcount() == 0
    calls = [nvml.nvmlShutdown, nvml.nvmlDeviceGetCount,
             lambda: nvml.nvmlDeviceGetHandleByIndex(0),
             lambda: nvml.nvmlDeviceGetName(nvml.c_nvmlDevice_t(0)),
             lambda: nvml.nvmlDeviceGetMemoryInfo(nvml.c_nvmlDevice_t(0))]
    for call in calls:
        with pytest.raises(nvml.NVMLError_Uninitialized) as info:
            call()
        assert isinstance(info.value, nvml.NVMLError)
        assert info.value.value == nvml.NVML_ERROR_UNINITIALIZED
        assert str(info.value) == "Uninitialized"


def test_init_and_shutdown_are_counted_as_in_pynvml():
    nvml.nvmlInit()
    nvml.nvmlInit()
    try:
        nvml.nvmlShutdown()
        assert nvml.nvmlDeviceGetCount() >= 1       # one user is left
    finally:
        nvml.nvmlShutdown()
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlShutdown()
    assert nvml_refcount() == 0


def test_errors_are_made_from_codes_as_in_pynvml():
    assert type(nvml.NVMLError(1)) is nvml.NVMLError_Uninitialized
    assert type(nvml.NVMLError(2)) is nvml.NVMLError_InvalidArgument
    assert nvml.NVMLError_InvalidArgument().value == 2
    assert nvml.NVMLError(1) == nvml.NVMLError_Uninitialized()
    assert str(nvml.NVMLError(999)) == "NVML Error with code 999"
    assert not issubclass(nvml.NVMLError, MemoryError)


# --- devices -----------------------------------------------------------------

def test_devices_are_the_models(started):
    n = model.cuda.runtime.getDeviceCount()
    assert nvml.nvmlDeviceGetCount() == n
    for i in range(n):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        assert handle == nvml.nvmlDeviceGetHandleByIndex(i)
        name = model.cuda.runtime.getDeviceProperties(i)["name"].decode()
        assert nvml.nvmlDeviceGetName(handle) == name


@pytest.mark.parametrize("index", [-1, 10**6])
def test_a_bad_index_is_an_invalid_argument(started, index):
    with pytest.raises(nvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(index)


def test_a_bad_handle_is_an_invalid_argument(started):
    with pytest.raises(TypeError):
        nvml.nvmlDeviceGetHandleByIndex("0")      # as ctypes' c_uint
    for call in (nvml.nvmlDeviceGetName, nvml.nvmlDeviceGetMemoryInfo):
        with pytest.raises(nvml.NVMLError_InvalidArgument):
            call(0)


def test_a_handle_by_pci_bus_id_is_the_cuda_devices(started):
    """NVML's order need not be CUDA's (CUDA_VISIBLE_DEVICES), so the book
    takes the handle by the device's PCI bus id: the stand-in takes it as
    pynvml does (str or bytes, NVML's 8-digit domain too)."""
    for i in range(model.cuda.runtime.getDeviceCount()):
        bus_id = model.cuda.Device(i).pci_bus_id
        handle = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        assert handle == nvml.nvmlDeviceGetHandleByIndex(i)
        assert nvml.nvmlDeviceGetHandleByPciBusId(bus_id.encode()) == handle
        assert nvml.nvmlDeviceGetHandleByPciBusId(
            "0000" + bus_id.lower()) == handle


def test_a_pci_bus_id_of_no_device_is_not_found(started):
    with pytest.raises(nvml.NVMLError_NotFound) as info:
        nvml.nvmlDeviceGetHandleByPciBusId("0000:FF:1F.0")
    assert info.value.value == nvml.NVML_ERROR_NOT_FOUND
    assert str(info.value) == "Not Found"


@pytest.mark.parametrize("bus_id", ["not a bus id", "", "0000:00:00"])
def test_a_malformed_pci_bus_id_is_an_invalid_argument(started, bus_id):
    with pytest.raises(nvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByPciBusId(bus_id)


def test_a_handle_by_pci_bus_id_needs_nvmlInit():
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetHandleByPciBusId(model.cuda.Device(0).pci_bus_id)


# --- memory ------------------------------------------------------------------

def memory(device=0):
    return nvml.nvmlDeviceGetMemoryInfo(
        nvml.nvmlDeviceGetHandleByIndex(device))


def test_used_is_what_the_pools_reserve_plus_the_context(started, pool):
    block = 8 * MiB
    before = memory()
    capacity = model.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"]
    assert before.total == capacity + nvml.CONTEXT_BYTES
    assert before.used == device_used() + nvml.CONTEXT_BYTES
    assert before.free == before.total - before.used
    assert before.free == model.cuda.Device(0).mem_info[0]

    x = model.empty(block // 4, dtype=model.float32)
    allocated = memory()
    assert allocated.used == before.used + block       # the pool reserved it
    del x
    cached = memory()
    assert cached.used == allocated.used       # the block is idle, reserved
    pool.free_all_blocks()
    after = memory()
    assert after.used == before.used                   # given back
    assert after.total == before.total
    assert after.used >= nvml.CONTEXT_BYTES            # the context stays


def test_used_counts_every_pool_on_the_device(started, pool):
    other = model.cuda.MemoryPool()
    before = memory().used
    block = other.malloc(MiB)             # a pool of its own, not the default
    assert memory().used == before + MiB
    del block
    other.free_all_blocks()
    assert memory().used == before


def test_memory_v2_has_the_same_numbers(started, pool):
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    v1 = nvml.nvmlDeviceGetMemoryInfo(handle)
    v2 = nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2)
    assert (v2.version, v2.reserved) == (nvml.nvmlMemory_v2, 0)
    assert (v2.total, v2.free, v2.used) == (v1.total, v1.free, v1.used)
    with pytest.raises(nvml.NVMLError_ArgumentVersionMismatch):
        nvml.nvmlDeviceGetMemoryInfo(handle, version=1)


def test_an_unused_device_has_no_context_and_is_not_started():
    """A device the process has not used shows no context, and reading its
    memory does not start it (NVML reads the driver, not a CUDA context)."""
    code = (
        "import src.nvmlmodel as nvml, src.cpudevice as model, modelkit\n"
        "nvml.nvmlInit()\n"
        "h = nvml.nvmlDeviceGetHandleByIndex(1)\n"
        "m = nvml.nvmlDeviceGetMemoryInfo(h)\n"
        "print(m.used, m.free == m.total,"
        " modelkit.device_initialized(1))\n"
        "model.cuda.Device(1).synchronize()\n"
        "print(nvml.nvmlDeviceGetMemoryInfo(h).used == nvml.CONTEXT_BYTES)\n"
        "nvml.nvmlShutdown()\n")
    out = subproc.run_code(code, env={"BOOK_CPU_DEVICES": "2"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "True", "False", "True"]


# --- the backend's choice ----------------------------------------------------

def test_the_model_gets_the_stand_in():
    assert choose_nvml("cpu") is nvml
    with pytest.raises(ValueError):
        choose_nvml("tpu")


def test_src_nvml_follows_the_backend():
    expected = "pynvml" if src.BACKEND == "gpu" else "src.nvmlmodel"
    assert src.nvml.__name__ == expected
    from src import nvml as chosen
    assert chosen is src.nvml


def test_a_gpu_gets_pynvml():
    pynvml = pytest.importorskip("pynvml")
    assert choose_nvml("gpu") is pynvml


def test_a_gpu_without_pynvml_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)    # import fails
    with pytest.raises(ImportError, match="pip install nvidia-ml-py"):
        choose_nvml("gpu")
