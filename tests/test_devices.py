"""src.devices: d2l's device helpers for CuPy, and the device table."""
import numpy as np
import pytest

from src import cp, devices
from src.devices import (device_table, html_table, num_gpus, to_device,
                         try_all_gpus, try_gpu)

N = cp.cuda.runtime.getDeviceCount()


def test_num_gpus_counts_the_runtime_devices():
    assert num_gpus() == N


def test_num_gpus_is_zero_when_cupy_is_unavailable(monkeypatch):
    monkeypatch.setattr(devices.cp, "is_available", lambda: False)
    assert num_gpus() == 0
    assert try_gpu(0) is None
    assert try_all_gpus() == [None]


@pytest.mark.parametrize("i", range(-2, N + 3))
def test_try_gpu_gives_the_device_if_it_exists_else_the_host(i):
    dev = try_gpu(i)
    if 0 <= i < N:
        assert dev == cp.cuda.Device(i)
    else:
        assert dev is None


def test_try_gpu_defaults_to_device_0():
    assert try_gpu() == cp.cuda.Device(0)


def test_try_all_gpus_lists_every_device_in_order():
    assert try_all_gpus() == [cp.cuda.Device(i) for i in range(N)]


def test_to_device_returns_the_array_itself_when_it_is_there():
    x = cp.arange(4)
    assert to_device(x, x.device) is x


@pytest.mark.skipif(N < 2, reason="needs two devices")
def test_to_device_copies_to_another_device():
    x = cp.arange(4)
    y = to_device(x, cp.cuda.Device(1))
    assert y is not x
    assert y.device == cp.cuda.Device(1)
    assert cp.asnumpy(y).tolist() == [0, 1, 2, 3]


def test_to_device_none_gives_a_numpy_array_on_the_host():
    out = to_device(cp.arange(3.0), None)
    assert type(out) is np.ndarray
    assert out.tolist() == [0.0, 1.0, 2.0]


def test_to_device_copies_a_host_array_to_the_device():
    out = to_device(np.arange(3), try_gpu(0))
    assert isinstance(out, cp.ndarray)
    assert out.device == cp.cuda.Device(0)


def test_device_table_has_one_row_of_properties_per_device():
    rows = device_table()
    assert [r["device"] for r in rows] == list(range(N))
    for r in rows:
        p = cp.cuda.runtime.getDeviceProperties(r["device"])
        assert r["name"] == p["name"].decode()
        assert r["compute capability"] == f"{p['major']}.{p['minor']}"
        assert r["memory (GiB)"] == round(p["totalGlobalMem"] / 2**30, 1)
        assert r["multiprocessors"] == p["multiProcessorCount"]
        assert r["copy engines"] == p["asyncEngineCount"]


def test_html_table_has_a_header_row_and_one_row_per_device():
    text = html_table([{"a": 1, "b": "x<y"}, {"a": 2, "b": "z"}])
    assert text == ('<table class="table"><tr><th>a</th><th>b</th></tr>'
                    "<tr><td>1</td><td>x&lt;y</td></tr>"
                    "<tr><td>2</td><td>z</td></tr></table>")


def test_html_table_of_no_rows_says_so():
    assert html_table([]) == "<p>(no devices)</p>"
