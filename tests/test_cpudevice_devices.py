"""The CPU device model keeps CuPy's device and host-access semantics."""
import threading

import numpy as np
import pytest

from src import cpudevice as cp


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


def test_implicit_conversion_to_numpy_raises_type_error_as_in_cupy():
    x = cp.arange(3)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy"):
        np.asarray(x)


def test_array_of_device_arrays_still_builds_a_device_array():
    out = cp.array([cp.arange(2), cp.arange(2) + 2])
    assert isinstance(out, cp.ndarray)
    assert out.get().tolist() == [[0, 1], [2, 3]]


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


def test_stream_errors_are_cuda_runtime_errors():
    s = cp.cuda.Stream()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="cudaErrorIllegalState"):
        s.end_capture()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="cudaErrorInvalidResourceHandle"):
        cp.cuda.get_elapsed_time(cp.cuda.Event(), cp.cuda.Event())
