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
"""

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
