"""Fork after the runtime started, as CUDA sees it: a child forked from a
process that had used CUDA cannot use it (its contexts, and the model's
worker threads and locks, do not survive the fork). The child's first
call that queues work, waits, or takes device memory raises
cudaErrorInitializationError, as CUDA's runtime does there; a fork before
the first call leaves the child free to start its own runtime."""
import os

from . import _errors

started = False         # set by the first queue (`_queue.Queue`)
_forked = False         # this process is such a child


def _after_fork_in_child():
    global _forked
    _forked = _forked or started


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def check_not_forked():
    """Raise CUDA's error in a child forked after the runtime started."""
    if _forked:
        raise _errors._error(
            _errors.errorInitializationError,
            "this process was forked from one whose CUDA runtime had "
            "started, and CUDA cannot be used in a forked child: start "
            "worker processes with multiprocessing's 'spawn' (or "
            "'forkserver') method")
