"""This machine, as a reference records it: device, software, date, commit.

Also the refusal to take the CPU device model's numbers for a GPU's.
"""
import datetime
import os
import platform
import subprocess

from .devices import device_slug
from .store import BOOK


def _cuda_version(v):
    return f"{v // 1000}.{v % 1000 // 10}"


def _nvidia_smi(bus_id):
    """Driver version and PCIe link from nvidia-smi, where it runs, for the
    GPU at PCI bus id ``bus_id`` (nvidia-smi numbers GPUs as NVML does, in
    PCI order and blind to ``CUDA_VISIBLE_DEVICES``: a CUDA index could
    name another GPU)."""
    fields = "driver_version,pcie.link.gen.max,pcie.link.width.max"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
             f"--id={bus_id}"], capture_output=True, text=True, timeout=30,
            check=True).stdout.strip()
        driver, gen, width = [s.strip() for s in out.split(",")]
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    info = {"driver": driver}
    if gen.isdigit():
        info["link"] = f"PCIe {gen}.0" + (f" x{width}" if width.isdigit()
                                           else "")
    return info


def device_info(index=0):
    """This machine's device and software as a reference records them."""
    import numpy
    from .. import BACKEND, cp
    info = {"backend": BACKEND, "python": platform.python_version(),
            "numpy": numpy.__version__,
            "host_cpus": len(os.sched_getaffinity(0))}
    if BACKEND != "gpu":
        info["name"] = "CPU device model"
        return info
    runtime = cp.cuda.runtime
    props = runtime.getDeviceProperties(index)
    name = props["name"]
    info.update(
        name=name.decode() if isinstance(name, bytes) else str(name),
        sms=props["multiProcessorCount"],
        l2_mib=props["l2CacheSize"] / 2**20,
        memory_gib=round(props["totalGlobalMem"] / 2**30, 1),
        compute_capability=f"{props['major']}.{props['minor']}",
        asyncEngineCount=props["asyncEngineCount"],
        concurrentKernels=props["concurrentKernels"],
        cuda_runtime=_cuda_version(runtime.runtimeGetVersion()),
        cuda_driver=_cuda_version(runtime.driverGetVersion()))
    try:
        from importlib.metadata import packages_distributions
        dists = packages_distributions().get("cupy", [])
        info["cupy"] = cp.__version__ + (f" ({dists[0]})" if dists else "")
    except Exception:                       # noqa: BLE001  (best effort)
        info["cupy"] = cp.__version__
    info.update(_nvidia_smi(runtime.deviceGetPCIBusId(index)))
    return info


def git_commit(where=None):
    """The short hash of the checkout at ``where`` (default: the book's),
    ``+dirty`` if tracked files changed; ``unknown`` outside git."""
    where = BOOK if where is None else where
    def git(*args):
        return subprocess.run(["git", "-C", str(where), *args],
                              capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def run_info():
    """What a reference records of a run here: the device and software,
    the date and the commit."""
    return {"device": device_info(), "date": today(),
            "commit": git_commit()}


def today():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


class RefusedError(RuntimeError):
    """A reference would not be a real GPU's, or a lesson failed."""


def refuse_model(backend, allow_model):
    """A reference is a real GPU's: refuse the CPU device model unless
    asked for it."""
    if backend != "gpu" and not allow_model:
        raise RefusedError(
            "this machine runs the CPU device model, not a GPU: a reference "
            "is a real GPU's numbers (pass --allow-model to write one "
            "anyway, for trying the tool)")


__all__ = ["device_slug", "device_info", "git_commit", "run_info", "today",
           "RefusedError", "refuse_model"]
