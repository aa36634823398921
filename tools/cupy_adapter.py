"""The adapter that runs CuPy's own tests on the CPU device model.

`install()` makes ``import cupy`` give the model (``src.cpudevice``) in the
process that runs the tests: ``cupy`` and its ``cupy.cuda.*`` modules are the
model's, and three small stand-ins fill what CuPy's test files import but
the model does not have, because it is not CuPy's code:

* ``cupy.testing``: the parts of CuPy's testing package these tests use
  (``parameterize`` and ``product`` as CuPy defines them, ``shaped_random``,
  ``multi_gpu``, ``slow``, ``assert_warns``);
* ``cupy.cuda.driver``: ``_is_cuda_python()`` False and
  ``get_build_version()`` 0 (the model is built against no CUDA: its
  ``runtimeGetVersion()`` is 0 too), read by decorators at import;
* ``cupy._creation.from_data``: the model's creation routines.

`SKIPS` lists the tests the model cannot pass as they are written, each with
the reason; `pytest_collection_modifyitems` (the runner's conftest uses it)
marks them skipped. `tools/cupy_tests.py` runs the tests.

Never import this where real CuPy is wanted: it replaces ``cupy`` in
``sys.modules`` for the whole process.
"""
import contextlib
import itertools
import os
import sys
import types
import unittest
import warnings
from pathlib import Path

import numpy
import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"

# "file::class-prefix::test" (the class's name before CuPy's "_param_"
# suffix; "" for a test outside a class) -> why the model cannot pass it.
SKIPS = {}


def _param_to_str(obj):
    if isinstance(obj, type):
        return obj.__name__
    if hasattr(obj, '__name__') and isinstance(obj.__name__, str):
        return obj.__name__
    return repr(obj)


def product(parameter):
    """CuPy's ``testing.product``: every combination, as dicts."""
    keys = sorted(parameter)
    return [dict(zip(keys, vals))
            for vals in itertools.product(*[parameter[k] for k in keys])]


def _as_method(f):
    def method(self, *args, **kwargs):
        return f(*args, **kwargs)
    return method


def parameterize(*params):
    """CuPy's ``testing.parameterize`` for ``unittest.TestCase`` classes:
    one class per parameter set, ``Base_param_{i}_{k=v, ...}``, put in the
    module (the decorated name becomes None); a function's value becomes a
    method that calls it, as CuPy does for Python functions."""
    def deco(base):
        assert issubclass(base, unittest.TestCase), \
            "the adapter parameterizes unittest classes only"
        module = sys.modules[base.__module__]
        for i, param in enumerate(params):
            members = {}
            for k, v in sorted(param.items()):
                if isinstance(v, types.FunctionType):
                    members[k] = _as_method(v)
                else:
                    members[k] = v
            text = ", ".join(f"{k}={_param_to_str(v)}"
                             for k, v in sorted(param.items()))
            cls = type(f"{base.__name__}_param_{i}_{{{text}}}", (base,),
                       members)
            cls.__module__ = module.__name__
            setattr(module, cls.__name__, cls)
        return None
    return deco


def multi_gpu(gpu_num):
    """CuPy's ``testing.multi_gpu``: skipped only when CUPY_TEST_GPU_LIMIT
    is set below ``gpu_num`` (the model has BOOK_CPU_DEVICES devices, 2 by
    default)."""
    limit = int(os.getenv('CUPY_TEST_GPU_LIMIT', '-1'))

    def wrapper(f):
        return pytest.mark.skipif(
            0 <= limit < gpu_num,
            reason='{} GPUs required'.format(gpu_num))(
                pytest.mark.multi_gpu(f))
    return wrapper


def slow(*args, **kwargs):
    """CuPy's ``testing.slow``: pytest's ``slow`` mark."""
    return pytest.mark.slow(*args, **kwargs)


@contextlib.contextmanager
def assert_warns(expected):
    """CuPy's ``testing.assert_warns``."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        yield
    if any(isinstance(m.message, expected) for m in w):
        return
    raise AssertionError('%s not triggerred' % getattr(
        expected, '__name__', expected))


def shaped_random(shape, xp=None, dtype=numpy.float32, scale=10, seed=0,
                  order='C'):
    """CuPy's ``testing.shaped_random``: seeded random values in
    ``[0, scale)`` of ``dtype``, on the device unless ``xp`` is NumPy."""
    import cupy
    xp = cupy if xp is None else xp
    numpy.random.seed(seed)
    dtype = numpy.dtype(dtype)
    if dtype == '?':
        a = numpy.random.randint(2, size=shape)
    elif dtype.kind == 'c':
        a = numpy.random.rand(*shape) + 1j * numpy.random.rand(*shape)
        a *= scale
    else:
        a = numpy.random.rand(*shape) * scale
    return xp.asarray(a.astype(dtype), order=order)


def install():
    """Make ``cupy`` the model in this process (see the module's text)."""
    if str(BOOK) not in sys.path:
        sys.path.insert(0, str(BOOK))
    import src.cpudevice as model
    modules = {"cupy": model, "cupy.cuda": model.cuda}
    for name in ("runtime", "memory", "stream", "device", "graph",
                 "pinned_memory", "memory_hook"):
        modules[f"cupy.cuda.{name}"] = getattr(model.cuda, name)
    testing = types.ModuleType("cupy.testing")
    for f in (parameterize, product, multi_gpu, slow, assert_warns,
              shaped_random):
        setattr(testing, f.__name__, f)
    driver = types.ModuleType("cupy.cuda.driver")
    driver._is_cuda_python = lambda: False
    driver.get_build_version = lambda: 0
    creation = types.ModuleType("cupy._creation")
    creation.from_data = model._creation
    modules.update({"cupy.testing": testing, "cupy.cuda.driver": driver,
                    "cupy._creation": creation,
                    "cupy._creation.from_data": model._creation})
    sys.modules.update(modules)
    model.testing = testing
    model.cuda.driver = driver
    return model


def skip_reason(nodeid):
    """The `SKIPS` reason for a test's node id, or None."""
    path, _, rest = nodeid.partition("::")
    parts = rest.split("::")
    cls = parts[0].partition("_param_")[0] if len(parts) > 1 else ""
    test = parts[-1].partition("[")[0]
    return SKIPS.get(f"{Path(path).name}::{cls}::{test}")


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = skip_reason(item.nodeid)
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"model: {reason}"))
