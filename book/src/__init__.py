"""The book's helper package: ``from src import cp, cpx`` in every lesson.

``cp`` is CuPy and ``cpx`` is cupyx on a machine with a usable GPU; on any
other machine they are the CPU device model (`src.cpudevice`), which mirrors
the part of CuPy's API the book uses and does the work for real on the CPU.
``from src import nvml`` gives NVIDIA's NVML binding (``pynvml``) beside
CuPy, and the model's stand-in for it (`src.nvmlmodel`) beside the model.

The backend is chosen once, when ``src`` is first imported: set
``BOOK_BACKEND`` before that (``%env BOOK_BACKEND=cpu`` in a notebook's
first cell). Changed later, it cannot take effect; the next ``from src
import ...`` says so, once, on stderr.
"""
import os as _os
import sys as _sys
import types as _types

from .backend import choose as _choose
from .backend import choose_nvml as _choose_nvml

#: BOOK_BACKEND as it was when the backend was chosen.
_ASKED = _os.environ.get("BOOK_BACKEND", "")
_chosen = _choose()
#: ``"gpu"`` or ``"cpu"``: the backend this process runs the lessons on.
BACKEND = _chosen[0]
#: CuPy on a GPU, else the CPU device model's mirror of it.
cp = _chosen[1]
#: ``cupyx`` on a GPU, else the CPU device model's mirror of it.
cpx = _chosen[2]
del _chosen


def _backend_changed_since_import():
    """Say once, on stderr, that BOOK_BACKEND asks for another backend
    than the one chosen when ``src`` was imported (a ``%env`` after the
    import), which it cannot have without a restart."""
    global _TOLD
    now = _os.environ.get("BOOK_BACKEND", "")
    asked = now.strip().lower() or "auto"
    if now == _TOLD or asked in ((_ASKED.strip().lower() or "auto"),
                                 BACKEND):
        return
    _TOLD = now
    print(f"BOOK_BACKEND is now {now!r}, but src chose its backend "
          f"({BACKEND}) when it was first imported, and keeps it: restart "
          "the kernel to use the new value (set it first: %env "
          "BOOK_BACKEND=... as the notebook's first cell).",
          file=_sys.stderr)


_TOLD = _ASKED
#: The names a lesson imports from ``src``: reading one checks BOOK_BACKEND.
_WATCHED = frozenset({"cp", "cpx", "BACKEND", "banner", "pick", "nvml"})


class _Package(_types.ModuleType):
    """``src`` itself: ``from src import cp`` (a name of `_WATCHED`) checks
    that BOOK_BACKEND has not changed since the import."""

    def __getattribute__(self, name):
        if name in _WATCHED:
            _backend_changed_since_import()
        return _types.ModuleType.__getattribute__(self, name)


_sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    """``src.nvml``, imported on first use: NVIDIA's ``pynvml`` on a GPU,
    the model's stand-in (`src.nvmlmodel`) on the CPU device model."""
    if name == "nvml":
        module = _choose_nvml(BACKEND)
        globals()["nvml"] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def device_names():
    """Names of the devices the active backend sees, as text."""
    names = []
    for i in range(cp.cuda.runtime.getDeviceCount()):
        props = cp.cuda.runtime.getDeviceProperties(i)
        names.append(props["name"].decode())
    return names


def pick(cpu, gpu):
    """A size for this backend: small on the CPU model, larger on a GPU."""
    return gpu if BACKEND == "gpu" else cpu


def banner():
    """Print which backend runs this lesson and on which devices."""
    if BACKEND == "gpu":
        print(f"Backend: GPU, CuPy {cp.__version__}")
    else:
        from .cpudevice import _hardware
        print("Backend: CPU device model (no usable GPU, or BOOK_BACKEND=cpu)")
        print("  real work on the CPU; events and the book's host clock read")
        print(f"  one timeline modelled on an {_hardware.profile.device} "
              "profile;")
        print("  a bare time.perf_counter reads the CPU (the book's page")
        print("  \"Running with a GPU and without one\" says more)")
    for i, name in enumerate(device_names()):
        total = cp.cuda.runtime.getDeviceProperties(i)["totalGlobalMem"]
        print(f"  device {i}: {name}, {total / 2**30:.1f} GiB")
    if BACKEND != "gpu":
        print("  (each device's memory: BOOK_CPU_DEVICE_MEMORY)")


__all__ = ["BACKEND", "cp", "cpx", "banner", "device_names", "pick"]
