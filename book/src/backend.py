"""Choose the book's backend: real CuPy on a GPU, else the CPU device model.

This is the only module that knows there are two backends. `BOOK_BACKEND`
selects one: ``auto`` (default) uses CuPy when ``cupy.is_available()`` is
true and the CPU device model otherwise; ``gpu`` insists on CuPy; ``cpu``
insists on the model. The value is read case-insensitively and with
surrounding spaces ignored (``CPU`` is ``cpu``), and an empty value means
``auto``.

`choose_nvml` picks NVML the same way: NVIDIA's ``pynvml`` beside CuPy, the
model's stand-in (`src.nvmlmodel`) beside the model; `choose_host_clock`
picks the book's host clock: ``time.perf_counter`` beside CuPy, the calling
thread's view of the modelled device clock beside the model.
"""
import ctypes.util
import glob
import os
import sys
import time

CHOICES = ("auto", "gpu", "cpu")


class BackendUnavailableError(RuntimeError):
    """The backend asked for with BOOK_BACKEND cannot run on this machine."""


def no_nvidia_driver():
    """True when this machine shows neither an NVIDIA device node nor the
    CUDA driver library: CuPy's own error ("CUDA driver version is
    insufficient") then misleads, since there is no driver at all."""
    if sys.platform == "win32":
        return ctypes.util.find_library("nvcuda") is None
    return (not glob.glob("/dev/nvidia[0-9]*")
            and ctypes.util.find_library("cuda") is None)


def _usable_cupy():
    """Return ``(cupy, None)`` when CuPy can reach a GPU, else ``(None, why)``."""
    try:
        import cupy
    except ImportError as e:
        return None, f"CuPy is not installed ({e})"
    try:
        if cupy.is_available():
            return cupy, None
        cupy.cuda.runtime.getDeviceCount()       # says why, when it can
        return None, "cupy.is_available() is False"
    except Exception as e:                       # CUDARuntimeError and kin
        why = f"{type(e).__name__}: {e}"
        if no_nvidia_driver():
            why = f"no NVIDIA GPU or driver found (CuPy says: {why})"
        return None, why


def choose(choice=None):
    """Return ``(name, cp, cpx)`` for ``choice`` or ``$BOOK_BACKEND``."""
    choice = (choice or os.environ.get("BOOK_BACKEND") or "auto")
    choice = choice.strip().lower()
    if choice not in CHOICES:
        raise ValueError(
            f"BOOK_BACKEND={choice!r} is not one of {', '.join(CHOICES)}")
    if choice in ("auto", "gpu"):
        cupy, why = _usable_cupy()
        if cupy is not None:
            import cupyx
            import cupyx.profiler  # noqa: F401  (cpx.profiler.benchmark)
            return "gpu", cupy, cupyx
        if choice == "gpu":
            raise BackendUnavailableError(
                f"BOOK_BACKEND=gpu, but CuPy cannot use a GPU here: {why}. "
                "Unset BOOK_BACKEND (or set BOOK_BACKEND=cpu) to run the "
                "lessons on the CPU device model.")
    from . import cpudevice
    return "cpu", cpudevice, cpudevice.cupyx


def choose_nvml(name):
    """The NVML module for backend ``name`` (``"gpu"`` or ``"cpu"``):
    NVIDIA's ``pynvml`` (package ``nvidia-ml-py``), which reads the driver,
    on a GPU; on the CPU device model, `src.nvmlmodel`, a stand-in with the
    same names that reports the model's memory."""
    if name == "gpu":
        try:
            import pynvml
        except ImportError as e:
            raise ImportError(
                f"NVML's Python binding is not installed ({e}): "
                "pip install nvidia-ml-py (requirements.txt installs it "
                "beside CuPy)") from e
        return pynvml
    if name != "cpu":
        raise ValueError(f"backend {name!r} is not 'gpu' or 'cpu'")
    from . import nvmlmodel
    return nvmlmodel


def choose_host_clock(name):
    """The book's host clock for backend ``name``, in seconds: on a GPU,
    ``time.perf_counter``; on the CPU device model, the calling thread's
    view of the modelled device clock (`cpudevice._clock.host_now`), which
    passes at real speed in the reader's own Python and NumPy, by CuPy's
    issue time in each call into the model, and by its modelled length in
    each wait for the device, so that it agrees with the model's events
    where a GPU's host clock agrees with a GPU's."""
    if name == "gpu":
        return time.perf_counter
    if name != "cpu":
        raise ValueError(f"backend {name!r} is not 'gpu' or 'cpu'")
    from .cpudevice._clock import host_now
    return host_now
