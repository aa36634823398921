"""Devices and the runtime on the CPU device model (`cupy.cuda.Device`,
`cupy.cuda.runtime`): the backend chooses the model, devices are counted,
configured and started lazily, and errors are CuPy's own."""
import threading

import pytest

import src.cpudevice as cp
import subproc


def run_py(code, **env):
    return subproc.output(code, env={"BOOK_BACKEND": "cpu", **env})


def test_cpu_backend_is_the_model():
    assert run_py("from src import BACKEND, cp, cpx; "
                  "print(BACKEND, cp.__name__, cpx.__name__)") == \
        "cpu src.cpudevice src.cpudevice.cupyx"


def test_auto_backend_works_without_cupy_installed():
    out = run_py("import sys; sys.modules['cupy'] = None\n"
                 "from src import BACKEND, cp; print(BACKEND, float(cp.ones(3)"
                 ".sum()))", BOOK_BACKEND="auto")
    assert out == "cpu 3.0"


def test_banner_names_backend_and_devices():
    out = run_py("from src import banner; banner()")
    # each device is named after the profile its timings are modelled on
    assert "CPU device model" in out and "H100 profile" in out
    assert "device 1: CPU device model (H100 profile)" in out
    assert all(len(line) <= 70 for line in out.splitlines())


def test_device_count_and_memory_are_configurable():
    out = run_py("from src import cp; r = cp.cuda.runtime\n"
                 "print(r.getDeviceCount(), "
                 "r.getDeviceProperties(2)['totalGlobalMem'])",
                 BOOK_CPU_DEVICES="3", BOOK_CPU_DEVICE_MEMORY="256MiB")
    assert out == f"3 {256 * 2**20}"


def test_properties_use_cupys_keys():
    p = cp.cuda.runtime.getDeviceProperties(0)
    assert isinstance(p["name"], bytes)
    for key in ("totalGlobalMem", "multiProcessorCount", "asyncEngineCount",
                "concurrentKernels", "major", "minor"):
        assert isinstance(p[key], int)
    # the device profile's value: the H100 reports 3 copy engines (the
    # model runs one per direction, as any device with two or more does)
    assert p["asyncEngineCount"] == 3
    assert p["concurrentKernels"] == 1


def test_bad_device_id_raises_cuda_invalid_device():
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as e:
        with cp.cuda.Device(99):
            pass
    assert e.value.status == 101
    assert str(e.value).startswith("cudaErrorInvalidDevice")
    with pytest.raises(RuntimeError):
        cp.cuda.runtime.getDeviceProperties(-1)


def test_device_starts_lazily_on_first_use():
    out = run_py("from src import cp\n"
                 "from modelkit import device_initialized as started\n"
                 "a = started(0); x = cp.ones(3); print(a, started(0))")
    assert out == "False True"


def test_device_context_and_array_device():
    with cp.cuda.Device(1):
        x = cp.ones(3)
        assert cp.cuda.runtime.getDevice() == 1
    assert cp.cuda.runtime.getDevice() == 0
    assert x.device == cp.cuda.Device(1) and x.device.id == 1


def test_operands_on_another_device_raise_cupys_error():
    with cp.cuda.Device(1):
        y = cp.ones(3)
    with pytest.raises(ValueError, match=r"resides \(1\) is different from "
                                         r"the current device \(0\)"):
        cp.ones(3) + y
    z = cp.asarray(y)                   # a copy onto device 0
    assert z.device.id == 0 and float(z.sum()) == 3.0
    assert cp.asarray(z) is z           # already here: no copy


def test_exception_classes_have_cupys_bases():
    assert issubclass(cp.cuda.runtime.CUDARuntimeError, RuntimeError)
    assert issubclass(cp.cuda.memory.OutOfMemoryError, MemoryError)


def test_cuda_launch_blocking_makes_every_operation_synchronous():
    code = ("from src import cp\n"
            "x = cp.ones(10**6); e0 = cp.cuda.Event()\n"
            "y = x * 2; e0.record(); print(e0.done)")
    assert run_py(code, CUDA_LAUNCH_BLOCKING="1") == "True"


def test_device_synchronize_waits_for_non_blocking_streams():
    gate = threading.Event()
    stream = cp.cuda.Stream(non_blocking=True)
    stream.launch_host_func(lambda _: gate.wait(5), None)
    with stream:
        y = cp.ones(4) * 2
    threading.Timer(0.05, gate.set).start()
    cp.cuda.Device().synchronize()
    assert stream.done
    assert y.sum().item() == 8


def test_runtime_device_synchronize_works_on_every_device():
    for i in range(cp.cuda.runtime.getDeviceCount()):
        with cp.cuda.Device(i):
            x = cp.arange(3)
            cp.cuda.runtime.deviceSynchronize()
            assert x.sum().item() == 3


def test_cuda_runtime_error_has_cupys_signature_and_the_models_hint():
    err = cp.cuda.runtime.CUDARuntimeError(1)
    assert str(err) == "cudaErrorInvalidValue: invalid argument"
    n = cp.cuda.runtime.getDeviceCount()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError) as info:
        cp.cuda.runtime.getDeviceProperties(n)
    assert str(info.value).startswith(
        "cudaErrorInvalidDevice: invalid device ordinal. The CPU device "
        "model has")
    assert info.value.status == 101


_GATHER = ("from src import cp\n"
           "from src.kernels import gather\n"
           "a = cp.arange(8, dtype=cp.float32)\n"
           "out = cp.empty(2, dtype=cp.float32)\n"
           "line = 'launch'\n"
           "try:\n"
           "    gather((1,), (32,), (a, cp.array([0, 1 << 40]), out,\n"
           "                         cp.int32(2)))\n"
           "    line = 'get'\n"
           "    out.get()\n"
           "except cp.cuda.runtime.CUDARuntimeError as e:\n"
           "    print(line, e.status, str(e).split('.')[0])\n")


def test_a_kernel_fault_is_reported_at_the_next_wait_not_at_the_launch():
    """A kernel's twin that indexes outside its arrays is a GPU's illegal
    address: CUDA's error comes at the next call that waits for the
    stream; with CUDA_LAUNCH_BLOCKING=1, at the launch."""
    fault = ("700 cudaErrorIllegalAddress: an illegal memory access was "
             "encountered")
    assert run_py(_GATHER) == "get " + fault
    assert run_py(_GATHER, CUDA_LAUNCH_BLOCKING="1") == "launch " + fault


def test_a_child_forked_after_the_runtime_started_cannot_use_it():
    """As CUDA refuses a forked child (cudaErrorInitializationError), the
    model does, at the child's first call; a fork before the runtime
    started leaves the child free to start its own."""
    code = ("import os\n"
            "from src import cp\n"
            "def child():\n"
            "    try:\n"
            "        float(cp.ones(3).sum())\n"
            "        return 0\n"
            "    except cp.cuda.runtime.CUDARuntimeError as e:\n"
            "        return e.status\n"
            "def fork():\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        os._exit(child())\n"
            "    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
            "before = fork()\n"
            "float(cp.ones(3).sum())\n"
            "print(before, fork(), float(cp.ones(3).sum()))\n")
    assert run_py(code) == "0 3 3.0"
