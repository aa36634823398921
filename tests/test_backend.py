"""Backend selection: BOOK_BACKEND picks CuPy or the CPU device model."""
import pytest

import subproc


def run_import(backend, code="from src import BACKEND; print(BACKEND)"):
    return subproc.run_code(code, backend=backend)


def gpu_usable():
    r = subproc.run_code("import cupy; print(cupy.is_available())")
    return r.stdout.strip() == "True"


def test_gpu_backend_without_gpu_is_a_clear_error():
    if gpu_usable():
        pytest.skip("this machine has a usable GPU")
    r = run_import("gpu")
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("src.backend.BackendUnavailableError: "
                           "BOOK_BACKEND=gpu, but CuPy cannot use a GPU")
    assert "BOOK_BACKEND=cpu" in last


def test_no_driver_at_all_is_named_and_cupys_text_kept():
    from src import backend
    if not backend.no_nvidia_driver():
        pytest.skip("this machine has an NVIDIA device node or driver")
    last = run_import("gpu").stderr.strip().splitlines()[-1]
    assert "no NVIDIA GPU or driver found (CuPy says: " in last


@pytest.mark.parametrize("value", ["CPU", " cpu ", ""])
def test_backend_name_is_case_blind_and_empty_means_auto(value):
    r = run_import(value)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() in ("cpu", "gpu")
    if value.strip():
        assert r.stdout.strip() == "cpu"


def test_unknown_backend_name_is_rejected():
    r = run_import("tpu")
    assert r.returncode != 0
    assert "BOOK_BACKEND='tpu' is not one of auto, gpu, cpu" in r.stderr


@pytest.mark.parametrize("nodes, lib, none", [
    ([], None, True),
    (["/dev/nvidia0"], None, False),
    ([], "libcuda.so.1", False),
    (["/dev/nvidia0"], "libcuda.so.1", False),
])
def test_no_nvidia_driver_means_neither_a_device_node_nor_the_library(
        monkeypatch, nodes, lib, none):
    from src import backend
    monkeypatch.setattr(backend.sys, "platform", "linux")
    monkeypatch.setattr(backend.glob, "glob", lambda pattern: list(nodes))
    monkeypatch.setattr(backend.ctypes.util, "find_library",
                        lambda name: lib if name == "cuda" else None)
    assert backend.no_nvidia_driver() is none


def test_the_backends_page_quotes_the_default_profile_as_it_is():
    """book/backends.md documents the default profile cost by cost; a
    recalibrated profile (`benchmarks/calibrate.py`) fails here until the
    page says its numbers."""
    import json
    from pathlib import Path

    from modelkit import model_profile
    data = json.loads(Path(model_profile()[2]).read_text())
    page = " ".join((Path(subproc.BOOK) / "backends.md").read_text().split())
    host, kernel, copy = data["host"], data["kernel"], data["copy"]
    quoted = {
        "launch latency": f"launch latency ({kernel['launch_us']:g} µs)",
        "memory bandwidth": "memory bandwidth "
                            f"({kernel['memory_gbps'] / 1000:.3g} TB/s",
        "copy latency": f"a latency ({copy['latency_us']:g} µs)",
        "link": f"({copy['h2d_pinned_gbps']:.0f} GB/s host to device, "
                f"{copy['d2h_pinned_gbps']:.0f} GB/s back)",
        "staging": f"bounce buffer ({host['pageable_stage_gbps']:g} GB/s)",
        "context": f"creates its context ({host['context_create_ms']:g} ms",
        "module": f"loads its module ({host['module_load_ms']:g} ms)",
        "issue": f"a launch {host['issue_us']['launch']:g} µs, a "
                 f"reduction's launch {host['issue_us']['reduction']:g}, "
                 f"a graph's launch {host['issue_us']['graph']:g}, a copy "
                 f"{host['issue_us']['copy']:g}, an event "
                 f"{host['issue_us']['event']:g}, a call that queues "
                 f"nothing {host['issue_us']['call']:g}",
        "sync": f"(`sync_us`, {host['sync_us']:g} µs:",
        "name": f"`CPU device model ({data['name']} profile)`",
    }
    missing = {what: text for what, text in quoted.items()
               if text not in page}
    assert not missing, f"book/backends.md does not say: {missing}"


def test_a_backend_asked_for_after_the_import_is_told_once():
    """``%env BOOK_BACKEND=...`` after ``src`` was imported cannot change
    the backend: the next ``from src import ...`` says so once, and says
    nothing of a value that asks for the backend in use."""
    code = ("import os\nimport src\n"
            "os.environ['BOOK_BACKEND'] = ' CPU '\nfrom src import cp\n"
            "print('same', flush=True)\n"
            "os.environ['BOOK_BACKEND'] = 'gpu'\nfrom src import cp, pick\n"
            "from src import cp\nprint(src.BACKEND, src.nvml.__name__)\n")
    r = run_import("cpu", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["same", "cpu", "src.nvmlmodel"]
    told = r.stderr.strip().splitlines()
    assert len(told) == 1, told
    assert told[0].startswith("BOOK_BACKEND is now 'gpu', but src chose "
                              "its backend (cpu)")
    assert "restart the kernel" in told[0]
