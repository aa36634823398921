"""The specs the book's CUDA kernels are built from, and their CUDA text.

A spec holds exactly the arguments of its CuPy constructor (`Elementwise`,
`Reduction`, `Raw`); `build` constructs the kernel and keeps its spec in
`SPECS`, so that a lesson can show the CUDA text (`source`) and the tests
can compile it with NVRTC. The kernels themselves are in `src.kernels`.
"""
from typing import NamedTuple

from . import cp


class Elementwise(NamedTuple):
    """Arguments of ``cp.ElementwiseKernel``."""
    in_params: str
    out_params: str
    operation: str
    name: str


class Reduction(NamedTuple):
    """Arguments of ``cp.ReductionKernel``."""
    in_params: str
    out_params: str
    map_expr: str
    reduce_expr: str
    post_map_expr: str
    identity: str
    name: str
    reduce_type: str = None


class Raw(NamedTuple):
    """Arguments of ``cp.RawKernel``."""
    code: str
    name: str


SPECS = {}
_CLASSES = {Elementwise: cp.ElementwiseKernel,
            Reduction: cp.ReductionKernel,
            Raw: cp.RawKernel}


def build(spec):
    """Construct the CuPy kernel for ``spec`` and keep the spec in `SPECS`."""
    SPECS[spec.name] = spec
    return _CLASSES[type(spec)](*spec)


def source(kernel):
    """The CUDA text of ``kernel`` (a kernel object or its name), to show."""
    spec = SPECS[getattr(kernel, "name", kernel)]
    if isinstance(spec, Raw):
        return spec.code.strip()
    head = (f"// {type(spec).__name__}Kernel {spec.name}"
            f"({spec.in_params}) -> ({spec.out_params})")
    if isinstance(spec, Elementwise):
        return f"{head}\n{spec.operation.strip()}"
    text = (f"{head}\n// accumulates in {spec.reduce_type or 'T'}, "
            f"starting from {spec.identity}\n"
            f"map:      {spec.map_expr}\n"
            f"reduce:   {spec.reduce_expr}\n"
            f"post_map: {spec.post_map_expr}")
    if getattr(kernel, "stages", None):
        text += "\n" + "\n".join(f"// {line}" for line in kernel.stages)
    return text
