"""User-defined kernels on the CPU device model (``cupy.ElementwiseKernel``,
``cupy.ReductionKernel``, ``cupy.RawKernel``, ``cupy.fuse``).

The model cannot run CUDA C. A kernel keeps its CUDA source (shown by the
lessons, compiled by NVRTC in the tests) and, when launched, runs the NumPy
twin registered for its name in `src.twins`, queued on the current stream
like any kernel. An ``ElementwiseKernel`` or ``ReductionKernel`` with no
twin runs through `._ctranslate` when its code is plain C (arithmetic, math
functions, ternaries, casts, local declarations); a registered twin wins.
A ``RawKernel`` always needs a twin. Arguments are checked at the call as
CuPy checks them.
"""
import math

import numpy

from .. import twins
from . import _core, _ctranslate, _errors, _hardware, _ndarray, _routines
from ._core import _broadcast_shape, _check_device, _launch
from ._ndarray import _empty, ndarray
from ._hardware import api

# The twins' %globaltimer reads the model's device clock.
twins.set_globaltimer(_hardware.globaltimer_ns)

_C_TYPES = {
    "bool": "bool", "char": "int8", "signed char": "int8",
    "unsigned char": "uint8", "short": "int16", "unsigned short": "uint16",
    "int": "int32", "unsigned int": "uint32", "long long": "int64",
    "unsigned long long": "uint64", "half": "float16", "float": "float32",
    "double": "float64", "complex<float>": "complex64",
    "complex<double>": "complex128",
}
_NUMPY_NAMES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64", "float16", "float32", "float64",
                "complex64", "complex128"}


class _Param:
    def __init__(self, text):
        tokens = text.split()
        if len(tokens) < 2:
            raise ValueError(f"Syntax error: {text!r}: a parameter is "
                             "'[raw] TYPE NAME'")
        self.raw = tokens[0] == "raw"
        if self.raw:
            tokens = tokens[1:]
        self.name = tokens[-1]
        self.ctype = " ".join(tokens[:-1])
        name = _C_TYPES.get(self.ctype, self.ctype)
        self.dtype = numpy.dtype(name) if name in _NUMPY_NAMES else None


def _parse(params):
    return tuple(_Param(p) for p in params.split(",") if p.strip())


def _steps(name, params, args):
    """How many steps a kernel loops over, for a kernel the profile gives a
    rate per step: the largest value of its argument named ``per``."""
    own = _hardware.profile.kernels.get(name)
    per = own.get("per") if own else None
    if isinstance(per, int):            # a RawKernel's argument, by place
        a = args[per] if per < len(args) else 0
        return max(int(a), 0)
    for p, a in zip(params, args):
        if p.name == per:
            a = a._a if isinstance(a, ndarray) else a
            return max(int(numpy.max(a, initial=0)), 0) if numpy.size(a) \
                else 0
    return 1


def _real_time(twin):
    """Does the twin's real duration count as device time (it waits on
    the host: registered with ``real_time=True``)?"""
    return getattr(twin, "real_time", False)


def _resolve_types(in_params, args, out_params=(), outs=()):
    """Bind type placeholders as CuPy does; raise on a fixed-type mismatch."""
    types = {}
    for p, a in list(zip(out_params, outs)) + list(zip(in_params, args)):
        if not isinstance(a, ndarray):
            if isinstance(a, numpy.ndarray):
                raise TypeError(f"Unsupported type {type(a)} for argument "
                                f"{p.name}: copy it with cp.asarray() first")
            continue
        if p.dtype is not None:
            if a.dtype != p.dtype:
                raise TypeError(
                    "Type is mismatched. %s %s %s (the kernel declares "
                    "%s %s; convert with .astype(cp.%s))"
                    % (p.name, a.dtype, p.dtype, p.ctype, p.name, p.dtype))
        elif p.ctype in types:
            if types[p.ctype] != a.dtype:
                raise TypeError("Type is mismatched. %s %s %s %s"
                                % (p.name, a.dtype, types[p.ctype], p.ctype))
        else:
            types[p.ctype] = a.dtype
    for p, a in zip(in_params, args):
        if not isinstance(a, ndarray) and p.dtype is None \
                and p.ctype not in types:
            types[p.ctype] = numpy.asarray(a).dtype

    def dtype_of(p):
        return p.dtype if p.dtype is not None else types[p.ctype]
    return dtype_of


def _twin_or_translation(kernel, translate, dtype_of):
    """The registered twin of ``kernel``, else its code translated to NumPy
    for these argument types (cached per type signature)."""
    try:
        return twins.lookup(kernel.name)
    except NotImplementedError:
        pass
    params = kernel.in_params + kernel.out_params
    key = (kernel.name,) + tuple(dtype_of(p) for p in params)
    fn = kernel._translated.get(key)
    if fn is None:
        fn = kernel._translated[key] = translate(kernel, dtype_of)
    return fn


def _host_value(p, a, dtype_of, shape):
    """What the twin receives for argument ``a`` of parameter ``p``."""
    if isinstance(a, ndarray):
        v = a._a
        if p.raw:
            return v
        if v.shape == shape and 1 not in shape:
            # what broadcast_to gives here (a read-only view, the same
            # strides), at a sixth of its cost
            v = v.view()
            v.flags.writeable = False
            return v
        return numpy.broadcast_to(v, shape)
    return dtype_of(p).type(a)


class ElementwiseKernel:
    """An elementwise kernel; on the model it runs its NumPy twin."""

    def __init__(self, in_params, out_params, operation, name="kernel",
                 reduce_dims=True, preamble="", no_return=False,
                 return_tuple=False, *, loop_prep="", after_loop="",
                 options=()):
        self.in_params = _parse(in_params)
        self.out_params = _parse(out_params)
        self.nin, self.nout = len(self.in_params), len(self.out_params)
        self.nargs = self.nin + self.nout
        self.operation = operation
        self.name = name
        self.preamble = preamble
        self.no_return = no_return
        self.return_tuple = return_tuple
        self.options = options
        self.loop_prep, self.after_loop = loop_prep, after_loop
        self._translated = {}

    @api("launch")
    def __call__(self, *args, size=None, block_size=None, stream=None):
        if len(args) not in (self.nin, self.nargs):
            raise TypeError(f"Wrong number of arguments for {self.name!r}: "
                            f"{len(args)} given, {self.nin} or {self.nargs} "
                            "expected")
        ins, outs = args[:self.nin], args[self.nin:]
        arrays = [a for a in args if isinstance(a, ndarray)]
        _check_device(arrays)
        dtype_of = _resolve_types(self.in_params, ins, self.out_params, outs)
        shaped = [a for p, a in zip(self.in_params + self.out_params, args)
                  if isinstance(a, ndarray) and not p.raw]
        if shaped:
            shape = _broadcast_shape(shaped)
            if size is not None and size != math.prod(shape):
                raise ValueError("The size of the arrays is not compatible "
                                 "with the size argument")
        elif size is not None:
            shape = (size,)
        else:
            raise ValueError("Loop size is undecided: give size= when no "
                             "argument array sets the shape")
        if not outs:
            outs = tuple(_empty(shape, dtype_of(p)) for p in self.out_params)
        for o in outs:
            if not isinstance(o, ndarray):
                raise TypeError("Output arguments must be cupy.ndarray")
        host_in = [_host_value(p, a, dtype_of, shape)
                   for p, a in zip(self.in_params, ins)]
        host_out = [o._a for o in outs]
        twin = _twin_or_translation(self, _ctranslate.elementwise, dtype_of)
        _launch(lambda: twin(*host_in, *host_out),
                _ndarray._nbytes(ins) + sum(o.nbytes for o in host_out),
                stream=stream, name=self.name, items=math.prod(shape),
                steps=_steps(self.name, self.in_params, ins),
                real=_real_time(twin))
        if self.no_return:
            return None
        if self.nout == 1 and not self.return_tuple:
            return outs[0]
        return tuple(outs)


class ReductionKernel:
    """A reduction kernel; on the model it runs its NumPy twin."""

    def __init__(self, in_params, out_params, map_expr, reduce_expr,
                 post_map_expr, identity, name="reduce_kernel",
                 reduce_type=None, reduce_dims=True, preamble="",
                 options=()):
        self.in_params = _parse(in_params)
        self.out_params = _parse(out_params)
        if len(self.out_params) != 1:
            raise NotImplementedError("the CPU device model supports one "
                                      "output per reduction")
        self.nin = len(self.in_params)
        self.map_expr, self.reduce_expr = map_expr, reduce_expr
        self.post_map_expr = post_map_expr
        self.identity = "" if identity is None else str(identity)
        self.name = name
        self.reduce_type = reduce_type
        self.preamble = preamble
        self.options = options
        self._translated = {}

    @api("reduction")
    def __call__(self, *args, out=None, axis=None, keepdims=False,
                 stream=None):
        if len(args) != self.nin:
            raise TypeError(f"Wrong number of arguments for {self.name!r}: "
                            f"{len(args)} given, {self.nin} expected")
        arrays = [a for a in args if isinstance(a, ndarray)]
        _check_device(arrays)
        dtype_of = _resolve_types(self.in_params, args,
                                  self.out_params, () if out is None
                                  else (out,))
        if not arrays:
            raise ValueError("a reduction needs at least one array argument")
        shape = _broadcast_shape([a for p, a in zip(self.in_params, args)
                                  if isinstance(a, ndarray) and not p.raw])
        rshape = _routines._reduced_shape(shape, axis, keepdims)
        if out is None:
            out = _empty(rshape, dtype_of(self.out_params[0]))
        elif out.shape != rshape:
            raise ValueError(f"Out shape is mismatched: {out.shape} != "
                             f"{rshape}")
        host_in = [_host_value(p, a, dtype_of, shape)
                   for p, a in zip(self.in_params, args)]
        dst = out._a
        twin = _twin_or_translation(self, _ctranslate.reduction, dtype_of)
        if out.size and 0 in shape and not self.identity.strip():
            raise ValueError("zero-size array to reduction operation "
                             f"{self.name} which has no identity")

        def run():
            dst[...] = twin(*host_in, axis=axis, keepdims=keepdims)
        _launch(run, _ndarray._nbytes(args) + dst.nbytes, stream=stream,
                name=self.name, items=math.prod(shape),
                real=_real_time(twin))
        return out


class RawKernel:
    """A kernel from CUDA C source; on the model it runs its NumPy twin."""

    def __init__(self, code, name, options=(), backend="nvrtc", *,
                 translate_cucomplex=False, enable_cooperative_groups=False,
                 jitify=None):
        self.code = code
        self.name = name
        self.options = options
        self.backend = backend

    @api("launch")
    def __call__(self, grid, block, args, *, shared_mem=0, stream=None):
        # CuPy's Function.__call__ declares ``tuple grid, tuple block``;
        # Cython's check gives this message
        for what, v in (("grid", grid), ("block", block)):
            if not isinstance(v, tuple):
                raise TypeError(f"Argument '{what}' has incorrect type "
                                f"(expected tuple, got {type(v).__name__})")
        args = tuple(args)          # any sequence: a tuple or a list
        arrays = [a for a in args if isinstance(a, ndarray)]
        _check_device(arrays)
        for a in args:
            if isinstance(a, numpy.ndarray) and a.size != 1:
                raise TypeError(
                    "You are trying to pass a numpy.ndarray of shape {} as a "
                    "kernel parameter. Only numpy.ndarrays of size one can be "
                    "passed by value. If you meant to pass a pointer to "
                    "__global__ memory, you need to pass a cupy.ndarray "
                    "instead.".format(a.shape))
        host = tuple(a._a.reshape(-1) if isinstance(a, ndarray)
                     and a.flags.c_contiguous else
                     a._a if isinstance(a, ndarray) else
                     a.reshape(-1)[0] if isinstance(a, numpy.ndarray) else a
                     for a in args)
        twin = twins.lookup(self.name)
        threads = math.prod(grid) * math.prod(block)

        def run():
            try:
                twin(grid, block, host, shared_mem=shared_mem)
            except IndexError:  # it read outside its arrays: a GPU faults
                raise _errors._error(
                    _errors.errorIllegalAddress,
                    f"kernel {self.name!r} read or wrote outside its "
                    "arrays; CUDA reports the fault at a later call (set "
                    "CUDA_LAUNCH_BLOCKING=1 to have it at the launch)"
                ) from None
        _launch(run,
                _ndarray._nbytes(args), stream=stream, name=self.name,
                items=threads, steps=_steps(self.name, (), args),
                real=_real_time(twin))


# -- cupy.fuse ----------------------------------------------------------------
_fusing = _core._fusing


class _Fused:
    def __init__(self, func, name):
        self.func = func
        self.name = name or func.__name__
        self.__name__ = func.__name__      # as functools.update_wrapper
        self.__doc__ = func.__doc__
        self._types = {}

    def _body(self, *args):
        _fusing.on = True
        try:
            return self.func(*args)
        finally:
            _fusing.on = False

    def _result_type(self, args):
        """The shape and dtype of the result, from a run of the body on
        stand-ins: one element per array when the body is elementwise;
        when it reduces (``cp.sum(x, axis=0)``), stand-ins of the real
        shapes (read-only zero-stride views: no device memory is touched),
        cached per signature as CuPy caches a fused kernel's compilation.
        Errors in the body are raised here, at the call."""
        key = tuple((a.shape, a.dtype) if isinstance(a, ndarray) else type(a)
                    for a in args)
        res = self._types.get(key)
        if res is not None:
            return res
        _core._fusing.reduced = False
        with numpy.errstate(all="ignore"):
            probe = numpy.asarray(
                self._body(*_routines._stand_ins(args, "element")))
        bshape = _broadcast_shape([a for a in args if isinstance(a, ndarray)])
        if _core._fusing.reduced or probe.ndim not in (0, len(bshape)):
            with numpy.errstate(all="ignore"):
                probe = numpy.asarray(
                    self._body(*_routines._stand_ins(args, "full")))
            res = (probe.shape, probe.dtype)
        elif probe.size == 1 and probe.ndim == 0:
            res = ((), probe.dtype)
        else:
            res = (bshape, probe.dtype)
        self._types[key] = res
        return res

    @api("launch")
    def __call__(self, *args):
        arrays = [a for a in args if isinstance(a, ndarray)]
        if not arrays:
            return self.func(*args)
        _check_device(arrays)
        _broadcast_shape(arrays)
        shape, dtype = self._result_type(args)
        return _ndarray._queue_into(shape, dtype, self._body, args)


def fuse(*args, **kwargs):
    """Fuse a function of elementwise operations into one kernel launch."""
    name = kwargs.get("kernel_name")
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return _Fused(args[0], None)
    return lambda f: _Fused(f, name)
