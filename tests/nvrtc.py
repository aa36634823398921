"""Compile CUDA C with NVRTC from NVIDIA's wheel, no GPU: CUDA 12's
(nvidia-cuda-nvrtc-cu12, which requirements.txt installs) or CUDA 13's
(nvidia-cuda-nvrtc, beside cupy-cuda13x on a CUDA 13 machine).

`compile_ptx` compiles a source to PTX or raises `CompileError` carrying
NVRTC's log. `wrap` turns a kernel's `src.kernels` spec into a complete
kernel, the way CuPy does before it compiles: typedefs for the type
placeholder, one thread per element, the body in the loop.
"""
import ctypes
import re
import sys
from pathlib import Path

import numpy as np

C_TYPES = {"bool": "bool", "int32": "int", "int64": "long long",
           "float32": "float", "float64": "double"}


class CompileError(RuntimeError):
    """NVRTC rejected a source; the message holds its log."""


#: Where NVIDIA's wheels put NVRTC, under a folder of ``sys.path``: CUDA
#: 13's (one folder for all of CUDA 13's libraries) and CUDA 12's, the
#: places cuda-pathfinder (CuPy 14's library finder) looks in, in its order.
WHEEL_LIBRARIES = ("nvidia/cu13/lib/libnvrtc.so.13",
                   "nvidia/cuda_nvrtc/lib/libnvrtc.so.12")

#: Why the tests that compile skip where `library_path` finds none.
MISSING = ("no NVRTC here: neither CUDA 12's wheel "
           "(nvidia-cuda-nvrtc-cu12) nor CUDA 13's (nvidia-cuda-nvrtc)")


def wheel_library(folders):
    """The first of `WHEEL_LIBRARIES` under one of ``folders``, or None."""
    for folder in folders:
        for name in WHEEL_LIBRARIES:
            lib = Path(folder or ".") / name
            if lib.is_file():
                return lib
    return None


def library_path():
    """Path of NVRTC's library: from a wheel on ``sys.path``, else where
    cuda-pathfinder finds it (a CUDA toolkit, where that package is
    installed, as it is beside CuPy 14); None if there is none."""
    lib = wheel_library(sys.path)
    if lib is not None:
        return lib
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib
        found = load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:              # noqa: BLE001  (not installed, not found)
        return None
    return Path(found) if found else None


_lib = None


def _nvrtc():
    global _lib
    if _lib is None:
        path = library_path()
        # CUDA 13's NVRTC, installed from its wheel, cannot open its
        # builtins library beside it by itself ("failed to open
        # libnvrtc-builtins.so.13.0" at the first compile): load it first.
        for builtins in sorted(path.parent.glob("libnvrtc-builtins.so.*")):
            ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(str(path))
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        _lib = lib
    return _lib


def _check(status, what):
    if status != 0:
        text = _nvrtc().nvrtcGetErrorString(status).decode()
        raise CompileError(f"{what} failed: {text}")


def compile_ptx(source, arch, name="kernel.cu"):
    """PTX for ``source`` on ``arch`` (e.g. ``"compute_75"``)."""
    return _compile(source, arch, name, "PTX").decode()


def compile_cubin(source, arch, name="kernel.cu"):
    """Machine code (a CUBIN) for ``source`` on a real ``arch`` (e.g.
    ``"sm_90"``). NVRTC then runs ptxas over its PTX, which checks what
    PTX alone does not: the text of inline ``asm`` (an instruction, a
    special register such as ``%globaltimer``, its operands' types)."""
    if not arch.startswith("sm_"):
        raise ValueError(f"a CUBIN needs a real architecture (sm_XX), "
                         f"got {arch!r}")
    return _compile(source, arch, name, "CUBIN")


def _compile(source, arch, name, output):
    lib = _nvrtc()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(),
                                  name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
        status = lib.nvrtcCompileProgram(
            prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        if status != 0:
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, log)
            raise CompileError(
                f"NVRTC could not compile {name} for {arch}:\n"
                f"{log.value.decode()}\n--- source ---\n{source}")
        size = ctypes.c_size_t()
        _check(getattr(lib, f"nvrtcGet{output}Size")(prog, ctypes.byref(size)),
               f"nvrtcGet{output}Size")
        out = ctypes.create_string_buffer(size.value)
        _check(getattr(lib, f"nvrtcGet{output}")(prog, out),
               f"nvrtcGet{output}")
        return out.raw[:size.value] if output == "CUBIN" else out.value
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _params(text, template):
    """``[(c_type, name, raw)]`` for CuPy parameters like 'T x, raw T y'."""
    out = []
    for param in filter(None, (p.strip() for p in text.split(","))):
        *words, ctype, name = param.split()
        if len(ctype) == 1:                       # a type placeholder
            ctype = template
        else:
            ctype = C_TYPES[np.dtype(ctype).name]
        out.append((ctype, name, "raw" in words))
    return out


def _signature(ins, outs):
    args = [f"const {t}* _raw_{n}" for t, n, _ in ins]
    args += [f"{t}* _raw_{n}" for t, n, _ in outs]
    return ", ".join(args + ["long long _size"])


def _bind(params, const, index):
    """Declarations binding each parameter name to its element or array."""
    lines = []
    for t, n, raw in params:
        if raw:
            lines.append(f"{'const ' if const else ''}{t}* {n} = _raw_{n};")
        else:
            lines.append(f"{'const ' if const else ''}{t} &{n} = "
                         f"_raw_{n}[{index}];")
    return "\n    ".join(lines)


def wrap(spec, template="float"):
    """A complete CUDA source for an Elementwise, Reduction or Raw spec."""
    kind = type(spec).__name__
    if kind == "Raw":
        return spec.code
    ins = _params(spec.in_params, template)
    outs = _params(spec.out_params, template)
    head = f"typedef {template} T;\n"
    if kind == "Elementwise":
        return head + f"""
extern "C" __global__ void {spec.name}({_signature(ins, outs)}) {{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
       i < _size; i += (long long)blockDim.x * gridDim.x) {{
    {_bind(ins, True, "i")}
    {_bind(outs, False, "i")}
    {spec.operation};
  }}
}}
"""
    if kind == "Reduction":
        reduce_type = (outs[0][0] if spec.reduce_type is None else
                       re.sub(r"\bT\b", template, spec.reduce_type))
        return head + f"""
typedef {reduce_type} _type_reduce;
#define REDUCE(a, b) ({spec.reduce_expr})
#define POST_MAP(a) ({spec.post_map_expr})
extern "C" __global__ void {spec.name}({_signature(ins, outs)}) {{
  __shared__ _type_reduce _sdata[256];
  _type_reduce _s = _type_reduce({spec.identity});
  for (long long _j = threadIdx.x; _j < _size; _j += blockDim.x) {{
    {_bind(ins, True, "_j")}
    _type_reduce _a = static_cast<_type_reduce>({spec.map_expr});
    _s = REDUCE(_s, _a);
  }}
  _sdata[threadIdx.x] = _s;
  __syncthreads();
  for (unsigned int _half = blockDim.x / 2; _half > 0; _half >>= 1) {{
    if (threadIdx.x < _half) {{
      _type_reduce _a = _sdata[threadIdx.x], _b = _sdata[threadIdx.x + _half];
      _sdata[threadIdx.x] = REDUCE(_a, _b);
    }}
    __syncthreads();
  }}
  if (threadIdx.x == 0) {{
    {_bind(outs, False, "blockIdx.x")}
    POST_MAP(_sdata[0]);
  }}
}}
"""
    raise TypeError(f"no CUDA wrapper for a {kind} spec")
