"""CuPy's own graph tests, run on the CPU device model as they stand.

``TestGraph.test_null_stream_cannot_capture`` is copied verbatim from CuPy
v14.2.0, ``tests/cupy_tests/cuda_tests/test_graph.py`` (commit dc1552a3),
Copyright (c) 2015 Preferred Infrastructure, Inc. and Preferred Networks,
Inc., under CuPy's MIT license. Only the imports differ: ``cupy``, ``cuda``
and ``testing`` name the model (CuPy's ``testing.assert_array_equal``
compares on the host, as `_Testing` does), and the test's
``thread_unsafe`` mark (pytest-run-parallel's, unknown here) is left out.
On the model ``runtimeGetVersion()`` is 0, so ``upload=True`` skips
``g.upload()`` as an old runtime would; the rest runs in both parameters.
"""
import numpy
import pytest

import src.cpudevice as cupy
from src.cpudevice import cuda


class _Testing:
    """The part of ``cupy.testing`` the copied test uses."""

    @staticmethod
    def assert_array_equal(x, y):
        numpy.testing.assert_array_equal(cupy.asnumpy(x), cupy.asnumpy(y))


testing = _Testing()


# ---- copied from CuPy v14.2.0 (see the docstring) ---------------------------
class TestGraph:

    @pytest.mark.parametrize('upload', (True, False))
    def test_null_stream_cannot_capture(self, upload):
        s = cupy.cuda.Stream(non_blocking=False)
        a = cupy.random.random((100,))

        with s:
            s.begin_capture()
            b = a + 4
            assert s.is_capturing()
            # cudaStreamLegacy is unhappy when a blocking stream is capturing
            with pytest.raises(cuda.runtime.CUDARuntimeError) as e:
                cuda.Stream.null.is_capturing()
            assert 'cudaErrorStreamCaptureImplicit' in str(e.value)
            g = s.end_capture()
        assert not s.is_capturing()
        assert not cuda.Stream.null.is_capturing()

        # check the graph integrity
        if upload and cuda.runtime.runtimeGetVersion() >= 11010:
            g.upload()

        cupy.cuda.get_current_stream().synchronize()  # ensure `a` is written
        g.launch()
        s.synchronize()
        testing.assert_array_equal(b, a + 4)
