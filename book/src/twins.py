"""NumPy twins of the book's CUDA kernels, registered by kernel name.

Every kernel in `src.kernels` has a NumPy function that computes the same
thing. The tests use the twin as the reference; the CPU device model runs
the twin when the kernel is launched (it cannot run CUDA C). Calling
conventions, by kernel kind:

* ``ElementwiseKernel``: ``twin(*inputs, *outputs)``; inputs are NumPy arrays
  (broadcast to the output shape) or NumPy scalars, outputs are NumPy arrays
  written in place.
* ``ReductionKernel``: ``twin(*inputs, axis=..., keepdims=...)`` returns the
  reduced value (array or scalar).
* ``RawKernel``: ``twin(grid, block, args, shared_mem=0)``; device arrays in
  ``args`` arrive as flat NumPy views of their memory, written in place.

Kernels that read the GPU's ``%globaltimer`` (nanoseconds; `src.kernels`
uses it to stamp when a kernel's first block started and its last block
ended) read `globaltimer_ns` in their twin. It is ``time.perf_counter_ns``,
the clock the CPU device model stamps its events with, so that the twins'
stamps and the model's event times line up; a model with a device clock of
its own (a modelled clock rather than the host's) installs it with
`set_globaltimer`.
"""
import time

_TWINS = {}


def register(name, real_time=False):
    """Decorator: make ``fn`` the NumPy twin of the kernel called ``name``.

    On the CPU device model a kernel's device time comes from the device
    profile's cost model, not from how long its twin runs on the CPU; with
    ``real_time=True`` (a kernel that waits for the host, as the tests'
    gates do) its real duration counts as well."""
    def decorate(fn):
        fn.real_time = real_time
        _TWINS[name] = fn
        return fn
    return decorate


def lookup(name):
    """The twin registered for kernel ``name``; a clear error if none is."""
    try:
        return _TWINS[name]
    except KeyError:
        raise NotImplementedError(
            f"the CPU device model cannot run CUDA C, and kernel {name!r} "
            "has no NumPy twin: register one with "
            f"@src.twins.register({name!r})") from None


_globaltimer = time.perf_counter_ns


def globaltimer_ns():
    """The device clock a twin reads for ``%globaltimer``, in nanoseconds."""
    return _globaltimer()


def set_globaltimer(clock):
    """Make ``clock()`` (integer nanoseconds, never decreasing) the device
    clock the twins read; ``None`` restores ``time.perf_counter_ns``. For
    the CPU device model, whose events must be on the same clock. Returns
    the clock it replaces, to put back."""
    global _globaltimer
    old = _globaltimer
    _globaltimer = time.perf_counter_ns if clock is None else clock
    return old
