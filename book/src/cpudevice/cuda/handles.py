"""Streams by their handles (``cupy.cuda.stream``'s, on the CPU device
model): the CUDA stream protocol and CuPy's ways of taking in a stream that
another library made.

* ``Stream.__cuda_stream__()`` (every stream's) gives ``(0, handle)``;
* ``Stream.from_external(obj)`` makes a Stream of any object that speaks
  the protocol; ``ExternalStream(ptr)`` one of a raw handle (deprecated in
  CuPy 14, with its DeprecationWarning);
* ``runtime.streamCreate``, ``streamDestroy`` and ``streamSynchronize``
  take handles.

A stream made from a handle queues its work on the queue of the stream with
that handle (`_hardware.streams`), so it is the same stream, not a copy;
a handle the model does not know fails at first use, as CUDA fails on it
(cudaErrorInvalidResourceHandle). This module adds ``__cuda_stream__`` and
``from_external`` to the classes of `stream` and sets the runtime calls
into `runtime`, as the allocator modules set theirs.
"""
import warnings

from .. import _hardware
from . import runtime
from .device import _state
from .stream import (_PTDS, Stream, _BaseStream, _ptrs, _queue_of, _Queue)


def __cuda_stream__(self):
    """The CUDA stream protocol: ``(version, handle)``, version 0 and this
    stream's ``ptr`` (0 for ``Stream.null``), for another library to wrap
    (``Stream.from_external`` in CuPy, PyTorch's ``ExternalStream``,
    cuda.core's ``Stream``)."""
    return (0, self.ptr)


def _bind(stream, ptr):
    """Make ``stream`` (made without a queue of its own) queue its work on
    the stream whose handle is ``ptr``: the null stream's or the per-thread
    one's (found by handle, `_queue_of`), a stream of the model's, or, for
    a handle the model does not know, one that refuses every use."""
    if ptr in (0, runtime.streamLegacy, runtime.streamPerThread):
        stream._queue = None
    else:
        stream._queue = _hardware.streams.get(ptr) or _UnknownHandle(ptr)
    return stream


def from_external(cls, obj):
    """A Stream for another library's stream ``obj``, through the CUDA
    stream protocol: ``obj.__cuda_stream__()`` gives ``(0, handle)``.

    The new stream queues its work on that handle's stream (the same queue),
    keeps ``obj`` alive (``_foreign_stream_ref``) and never destroys the
    stream; its ``device_id`` is -1 (unknown: the protocol does not say),
    so it is used on the current device. Errors are CuPy's: TypeError when
    ``obj`` lacks the protocol, returns no 2-tuple of ints, or a version
    other than 0. A handle that is not a stream of the model fails at first
    use (cudaErrorInvalidResourceHandle)."""
    try:
        version, stream_ptr = obj.__cuda_stream__()
    except AttributeError as e:
        raise TypeError(
            f"Object of type {type(obj).__name__} does not implement "
            "the CUDA stream protocol (__cuda_stream__ method)") from e
    except (TypeError, ValueError) as e:
        raise TypeError(
            "__cuda_stream__() must return a 2-tuple of "
            "(version, stream_ptr)") from e
    if not isinstance(version, int) or not isinstance(stream_ptr, int):
        raise TypeError(
            f"__cuda_stream__() must return (int, int), got "
            f"({type(version).__name__}, {type(stream_ptr).__name__})")
    if version != 0:
        raise TypeError(
            f"__cuda_stream__() returned unsupported version "
            f"{version}, only version 0 is supported")
    stream = cls.__new__(cls)
    _BaseStream.__init__(stream, stream_ptr, -1)
    _bind(stream, stream_ptr)
    stream._foreign_stream_ref = obj
    return stream


_BaseStream.__cuda_stream__ = __cuda_stream__
Stream.from_external = classmethod(from_external)


class ExternalStream(_BaseStream):
    """A CUDA stream not managed by CuPy, from its handle ``ptr``
    (``device_id`` -1: unknown). Deprecated since CuPy 14, with CuPy's
    DeprecationWarning: use ``Stream.from_external``. Its work goes to the
    stream with that handle; the caller destroys the stream."""

    def __init__(self, ptr, device_id=-1):
        warnings.warn(
            'ExternalStream is deprecated. Use Stream.from_external() instead '
            'to interoperate with external streams that implement the CUDA '
            'stream protocol.',
            DeprecationWarning,
            stacklevel=2
        )
        super().__init__(ptr, device_id)
        _bind(self, ptr)


class _UnknownHandle:
    """The queue of a stream handle the model does not know: any use of it
    raises cudaErrorInvalidResourceHandle, as CUDA does for a handle that
    is not a stream (or was destroyed)."""

    def __init__(self, ptr):
        self.ptr = ptr

    def __getattr__(self, name):
        raise runtime._error(
            runtime.errorInvalidResourceHandle,
            f"{self.ptr} is not the handle of a stream of the CPU device "
            "model (cp.cuda.Stream(), runtime.streamCreate()), or that "
            "stream was destroyed")


def _stream_of_handle(ptr):
    """A stream object for handle ``ptr`` (CuPy's ``_BaseStream(ptr, -1)``),
    queueing on that handle's stream."""
    return _bind(_BaseStream(ptr, -1), ptr)


def _queue_of_handle(ptr):
    """The queue of the stream whose handle is ``ptr`` (0 and 1: the legacy
    null stream, 2: this thread's per-thread stream); an unknown handle
    raises cudaErrorInvalidResourceHandle."""
    q = _queue_of(_stream_of_handle(ptr))
    if isinstance(q, _UnknownHandle):
        raise runtime.CUDARuntimeError(runtime.errorInvalidResourceHandle)
    return q


def _default_stream_ptr():
    """CuPy's ``get_default_stream_ptr``: the per-thread default stream's
    handle with CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1, else the legacy
    one's (1, never 0)."""
    return runtime.streamPerThread if _PTDS else runtime.streamLegacy


# -- cupy.cuda.runtime's stream calls ----------------------------------------
# Streams made by handle, with no Stream object to own them (and destroy them
# when it is freed): they live until `streamDestroy`.
_created = {}


def streamCreate():
    """A new blocking stream of the current device; its handle."""
    ptr = next(_ptrs)
    q = _Queue(_state(runtime.getDevice()), f"stream-{ptr}")
    _hardware.streams[ptr] = _created[ptr] = q
    return ptr


def streamDestroy(stream):
    """Destroy the stream with handle ``stream``: its worker finishes the
    work queued on it, then exits."""
    q = _created.pop(stream, None) or _hardware.streams.get(stream)
    if q is None:
        raise runtime.CUDARuntimeError(runtime.errorInvalidResourceHandle)
    _hardware.streams.pop(stream, None)
    q.close()


def streamSynchronize(stream):
    """Block the host until the work queued on handle ``stream`` has run."""
    _stream_of_handle(stream).synchronize()


for _name in ("streamCreate", "streamDestroy", "streamSynchronize"):
    setattr(runtime, _name, globals()[_name])
