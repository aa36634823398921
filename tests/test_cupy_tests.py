"""The runner of CuPy's own tests on the CPU device model
(``tools/cupy_tests.py``, through ``tools/cupy_adapter.py``) works end to
end. CuPy's test files are not in this repository and CI cannot fetch them,
so it runs here on two small files written as CuPy's are (same names, same
imports, CuPy's ``testing.parameterize`` over functions, a ``skipif`` read
at import); the behaviour CuPy's tests check is held by the model's own
tests (``tests/cpudevice/test_interop.py``, ``test_stream.py``,
``test_memory.py``)."""
import sys
import textwrap
import types
import unittest

import scripts
import subproc

adapter = scripts.load("tools/cupy_adapter.py")

STREAM = '''
    import pytest
    import cupy
    from cupy import cuda, testing
    from cupy._creation import from_data


    class TestCUDAStreamProtocol:
        def test_cuda_stream_method(self):
            s = cuda.Stream()
            assert s.__cuda_stream__() == (0, s.ptr)
            assert from_data.asarray is cupy.asarray


    class TestNotAsked:
        def test_not_selected(self):
            assert False
'''
MEMORY = '''
    import unittest
    import pytest
    import cupy.cuda
    from cupy.cuda import memory
    from cupy import testing


    @testing.parameterize(*testing.product({
        'allocator': [memory._malloc, memory.malloc_managed],
        'size': [8, 24],
    }))
    class TestUnownedMemory(unittest.TestCase):
        def test_view(self):
            src = self.allocator(self.size)
            mem = memory.UnownedMemory(src.ptr, self.size, src)
            assert (mem.ptr, mem.size) == (src.ptr, self.size)


    @pytest.mark.skipif(cupy.cuda.driver._is_cuda_python(), reason='never')
    class TestMemoryPointerAsync(unittest.TestCase):
        @testing.multi_gpu(2)
        def test_second_device(self):
            with cupy.cuda.Device(1):
                assert cupy.arange(3).device.id == 1

        def test_fails(self):
            assert False
'''


def test_the_runner_runs_the_asked_classes_on_the_model(tmp_path):
    tests = tmp_path / "tests" / "cupy_tests" / "cuda_tests"
    tests.mkdir(parents=True)
    (tests / "test_stream.py").write_text(textwrap.dedent(STREAM))
    (tests / "test_memory.py").write_text(textwrap.dedent(MEMORY))
    r = subproc.run(["tools/cupy_tests.py", "--source", str(tmp_path),
                     "--timeout", "240"], cwd=scripts.ROOT, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out           # test_listed_as_skipped fails
    assert "test_stream::TestCUDAStreamProtocol: 1 passed, 0 failed" in out
    assert "test_memory::TestUnownedMemory: 4 passed, 0 failed" in out
    assert "test_memory::TestMemoryPointerAsync: 1 passed, 1 failed" in out
    assert "TestNotAsked" not in out


def double(x):
    return 2 * x


def test_parameterize_names_classes_as_cupy_does():
    module = types.ModuleType("fake_cupy_test")
    sys.modules[module.__name__] = module
    try:
        class TestX(unittest.TestCase):
            def test_y(self):
                pass
        TestX.__module__ = module.__name__
        assert adapter.parameterize(*adapter.product(
            {"b": [1, 2], "f": [double]}))(TestX) is None
        names = sorted(n for n in vars(module) if n.startswith("TestX"))
        assert names == ["TestX_param_0_{b=1, f=double}",
                         "TestX_param_1_{b=2, f=double}"]
        case = getattr(module, names[1])("test_y")
        assert case.b == 2 and case.f(3) == 6   # a function: a method
    finally:
        del sys.modules[module.__name__]


def test_the_skip_list_matches_parameterized_classes(monkeypatch):
    monkeypatch.setattr(adapter, "SKIPS", {
        "test_memory.py::TestY::test_z": "why"})
    assert adapter.skip_reason(
        "test_memory.py::TestY_param_3_{a=1}::test_z") == "why"
    assert adapter.skip_reason("test_memory.py::TestY::test_z[x]") == "why"
    assert adapter.skip_reason("test_memory.py::TestY::test_w") is None
