"""Which devices there are, and d2l's helpers to pick one or fall back.

d2l's ``try_gpu`` falls back to ``torch.device('cpu')``. CuPy has no CPU
device: a CuPy array always lives on a GPU, and the host's arrays are NumPy
arrays. So here the fallback is ``None``, meaning "the host": `to_device`
turns ``None`` into a NumPy array, which the same array code then runs on.
"""
from html import escape

from . import cp


def num_gpus():
    """How many devices CuPy can use (0 when CUDA is missing or unusable)."""
    return cp.cuda.runtime.getDeviceCount() if cp.is_available() else 0


def try_gpu(i=0):
    """Device ``i`` if it exists, else ``None`` (the host), as d2l does."""
    return cp.cuda.Device(i) if 0 <= i < num_gpus() else None


def try_all_gpus():
    """Every device, or ``[None]`` (the host) when there is none."""
    return [cp.cuda.Device(i) for i in range(num_gpus())] or [None]


def to_device(x, device):
    """``x`` on ``device``, copied only if it lives elsewhere; ``None`` gives
    a NumPy array on the host (like PyTorch's ``x.to(device)``)."""
    if device is None:
        return cp.asnumpy(x)
    with device:
        return cp.asarray(x)


_MULTIPROCESSORS = {}       # device: multiprocessors, asked once


def multiprocessors(device=None):
    """The multiprocessors of ``device`` (default: the current one), asked
    once per device: ``getDeviceProperties`` takes an H100's host about
    0.8 ms, which the events around a kernel launched after it count."""
    if device is None:
        device = cp.cuda.runtime.getDevice()
    if device not in _MULTIPROCESSORS:
        _MULTIPROCESSORS[device] = cp.cuda.runtime.getDeviceProperties(
            device)["multiProcessorCount"]
    return _MULTIPROCESSORS[device]


def device_table():
    """One row per device with the properties the book relies on."""
    rows = []
    for i in range(num_gpus()):
        p = cp.cuda.runtime.getDeviceProperties(i)
        rows.append({
            "device": i,
            "name": p["name"].decode(),
            "compute capability": f"{p['major']}.{p['minor']}",
            "memory (GiB)": round(p["totalGlobalMem"] / 2**30, 1),
            "multiprocessors": p["multiProcessorCount"],
            "copy engines": p["asyncEngineCount"],
        })
    return rows


def html_table(rows):
    """``rows`` (dicts with the same keys) as an HTML table, for display."""
    if not rows:
        return "<p>(no devices)</p>"
    keys = list(rows[0])
    head = "".join(f"<th>{escape(str(k))}</th>" for k in keys)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(r[k]))}</td>" for k in keys)
        + "</tr>" for r in rows)
    return f'<table class="table"><tr>{head}</tr>{body}</table>'
