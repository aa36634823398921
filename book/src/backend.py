"""Choose the book's backend: real CuPy on a GPU, else the CPU device model.

This is the only module that knows there are two backends. `BOOK_BACKEND`
selects one: ``auto`` (default) uses CuPy when ``cupy.is_available()`` is
true and the CPU device model otherwise; ``gpu`` insists on CuPy; ``cpu``
insists on the model. The value is read case-insensitively and with
surrounding spaces ignored (``CPU`` is ``cpu``), and an empty value means
``auto``.
"""
import ctypes.util
import glob
import os
import sys

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
