"""The core of the CPU device model's arrays: queueing a kernel on a stream
(`_launch`), the device check, shapes and operand checks, the libraries
(cuBLAS, cuRAND) that CuPy refuses in a capture, and the pool new arrays are
allocated from. It knows no array type; the arrays' modules
build on it, each importing only those before it:

* `_copies`: host<->device copies (pinned, and pageable through staging);
* `_ndarray`: ``cupy.ndarray``, and allocating and queueing into new arrays
  (`_empty`, `_queue_into`);
* `_creation`: ``empty``, ``zeros``, ``asarray``, ``arange``, ...;
* `_routines`: elementwise ufuncs, reductions, ``matmul`` and ``dot``, and
  ``ndarray``'s operators and reduction methods, which are these routines.

The package's ``__init__`` gathers their public names.
"""
import operator
import threading

import numpy

from . import _hardware
from ._errors import shown
from .cuda import runtime
from .cuda.memory import get_default_memory_pool
from .cuda.stream import _queue_of


_pool = get_default_memory_pool()
# The profile's module: its ``profile`` is always the current one (read
# without `_hardware`'s module ``__getattr__``, on the hot path).
_profile = _hardware._profile


# -- queueing -----------------------------------------------------------------
_fusing = threading.local()     # set while a cupy.fuse body runs on a worker


def _in_fused_body():
    return getattr(_fusing, "on", False)


def _launch(fn, nbytes=0, flops=0, *, stream=None, name=None, items=0,
            steps=1, real=False, migrate=0.0):
    """Queue ``fn`` on the compute engine of ``stream`` (None: the current
    one), as a kernel that moves ``nbytes`` bytes and does ``flops``
    operations over ``items`` elements; its device time is the profile's
    cost. The first launch of kernel ``name`` on a device loads its module
    (the host waits). ``real=True`` (a twin registered with
    ``real_time=True``: work that waits on the host) makes it also take as
    long as it really runs. ``migrate``: seconds it stalls on page
    migrations of managed memory (`cuda.managed.touch`)."""
    q = _queue_of(stream)
    dev = q.dev
    if name is not None and q.capture is None:
        dev.load_module(name)
    cost = _profile.profile.kernel_cost(nbytes, flops, items, name, steps)
    if migrate:
        cost = (cost[0], cost[1] + migrate)
    q.submit(fn, dev.compute, cost=cost, kind=_hardware.KERNEL, real=real)


def _check_device(arrays):
    dev = runtime._tls.device
    for a in arrays:
        if a.data.device_id != dev:
            raise shown(ValueError(
                f"The device where the array resides ({a.data.device_id}) "
                f"is different from the current device ({dev}). Peer access "
                "is unavailable between these devices. Copy the array to "
                "the current device first (cp.asarray(array) inside "
                "`with cp.cuda.Device(...)`)."))


def _refuse_in_capture(library):
    """CuPy refuses cuBLAS and cuRAND calls on a capturing stream (their
    ``setStream``) before queueing anything: the capture stays valid."""
    if _queue_of(None).capture is not None:
        raise NotImplementedError(
            f"calling {library} API during stream capture is currently "
            "unsupported")


def _check_cublas_capture(dtype):
    """``matmul``/``dot``: integer and boolean products use CuPy's own
    kernel, the others cuBLAS, which capture refuses."""
    if dtype.kind not in "biu":
        _refuse_in_capture("cuBLAS")


def _normalize_shape(shape):
    if isinstance(shape, (int, numpy.integer)):
        shape = (operator.index(shape),)
    else:
        shape = tuple([operator.index(s) for s in shape])
    if shape and min(shape) < 0:
        raise ValueError("negative dimensions are not allowed")
    return shape


def _broadcast_shape(arrays):
    if len(arrays) == 1:
        return arrays[0]._a.shape
    shapes = [a.shape for a in arrays]
    if len(shapes) == 1 or all(s == shapes[0] for s in shapes):
        return shapes[0]
    try:
        return numpy.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError("operands could not be broadcast together with "
                         "shapes " + " ".join(str(s) for s in shapes) +
                         ": each axis must match or be 1 (reshape an "
                         "operand, or add an axis with x[:, None])") \
            from None


# -- operands -----------------------------------------------------------------
def _check_host_operand(x):
    if isinstance(x, numpy.ndarray) and x.ndim > 0:
        raise TypeError(
            f"Unsupported type {type(x)}: a NumPy array lives on the host; "
            "copy it to the device with cp.asarray() first")


_SCALARS = (bool, int, float, complex, numpy.generic)


def _check_ufunc_operand(x):
    """A ufunc takes device arrays and scalars; anything else (a list, a
    tuple, None) is refused as CuPy refuses it: ``Unsupported type``."""
    if isinstance(x, _SCALARS):
        return
    if isinstance(x, numpy.ndarray):
        _check_host_operand(x)
        return
    raise TypeError(f"Unsupported type {type(x)}")
