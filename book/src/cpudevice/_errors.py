"""CUDA's errors on the CPU device model: the status codes, their names and
descriptions, and ``CUDARuntimeError``, as CuPy's (``"cudaErrorInvalidDevice:
invalid device ordinal"``). ``cuda.runtime`` exports them; the simulated
hardware below it raises them too (a stream capture's rules). In a
notebook an error shows the reader's lines and its message, not the
model's frames (`src._tracebacks`)."""
from .._tracebacks import reader_traceback, shown  # noqa: F401 (model)

errorInvalidValue = 1
errorInitializationError = 3
errorMemoryAllocation = 2
errorInvalidDevice = 101
errorInvalidResourceHandle = 400
errorIllegalState = 401
errorNotReady = 600
errorIllegalAddress = 700
errorStreamCaptureUnsupported = 900
errorStreamCaptureInvalidated = 901
errorStreamCaptureMerge = 902
errorStreamCaptureUnmatched = 903
errorStreamCaptureUnjoined = 904
errorStreamCaptureIsolation = 905
errorStreamCaptureImplicit = 906
errorCapturedEvent = 907

_ERRORS = {
    errorInvalidValue: ("cudaErrorInvalidValue", "invalid argument"),
    errorMemoryAllocation: ("cudaErrorMemoryAllocation", "out of memory"),
    errorInitializationError: ("cudaErrorInitializationError",
                               "initialization error"),
    errorInvalidDevice: ("cudaErrorInvalidDevice", "invalid device ordinal"),
    errorInvalidResourceHandle: ("cudaErrorInvalidResourceHandle",
                                 "invalid resource handle"),
    errorIllegalState: ("cudaErrorIllegalState",
                        "the operation cannot be performed in the present "
                        "state"),
    errorNotReady: ("cudaErrorNotReady", "device not ready"),
    errorIllegalAddress: ("cudaErrorIllegalAddress",
                          "an illegal memory access was encountered"),
    errorStreamCaptureUnsupported: (
        "cudaErrorStreamCaptureUnsupported",
        "operation not permitted when stream is capturing"),
    errorStreamCaptureInvalidated: (
        "cudaErrorStreamCaptureInvalidated",
        "operation failed due to a previous error during capture"),
    errorStreamCaptureMerge: (
        "cudaErrorStreamCaptureMerge",
        "operation would result in a merge of separate capture sequences"),
    errorStreamCaptureUnmatched: (
        "cudaErrorStreamCaptureUnmatched",
        "capture was not ended in the same stream as it began"),
    errorStreamCaptureUnjoined: (
        "cudaErrorStreamCaptureUnjoined",
        "capturing stream has unjoined work"),
    errorStreamCaptureIsolation: (
        "cudaErrorStreamCaptureIsolation",
        "dependency created on uncaptured work in another stream"),
    errorStreamCaptureImplicit: (
        "cudaErrorStreamCaptureImplicit",
        "operation would make the legacy stream depend on a capturing "
        "blocking stream"),
    errorCapturedEvent: (
        "cudaErrorCapturedEvent",
        "operation not permitted on an event last recorded in a capturing "
        "stream"),
}


class CUDARuntimeError(RuntimeError):
    """A CUDA runtime error, with CUDA's status code, name and description."""

    def __init__(self, status):
        self.status = status
        name, text = _ERRORS.get(status, ("cudaErrorUnknown", "unknown error"))
        super().__init__(f"{name}: {text}")

    def __reduce__(self):
        return (type(self), (self.status,))

    _render_traceback_ = reader_traceback


def _error(status, hint):
    """CUDA's error for ``status``, with a sentence on what to do."""
    e = CUDARuntimeError(status)
    e.args = (f"{e.args[0]}. {hint}",)
    return e
