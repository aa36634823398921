"""``cupy._util`` on the CPU device model: the settings CuPy reads from the
environment at import, under CuPy's names. As in CuPy they are module
attributes read at each use, so a program may also change them at run time
(``cp._util.CUDA_ARRAY_INTERFACE_SYNC = False``).

* ``CUDA_ARRAY_INTERFACE_SYNC`` (``CUPY_CUDA_ARRAY_INTERFACE_SYNC``,
  default 1): importing an object by ``__cuda_array_interface__`` that names
  a ``stream`` synchronizes that stream from the host first; 0 skips it (the
  consumer must then order its own work after the producer's).
* ``CUDA_ARRAY_INTERFACE_EXPORT_VERSION``
  (``CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION``, default 3): the version an
  ndarray's ``__cuda_array_interface__`` exports; 2 exports no stream.
"""
import os

CUDA_ARRAY_INTERFACE_SYNC = bool(
    int(os.environ.get('CUPY_CUDA_ARRAY_INTERFACE_SYNC', 1)))
CUDA_ARRAY_INTERFACE_EXPORT_VERSION = int(
    os.environ.get('CUPY_CUDA_ARRAY_INTERFACE_EXPORT_VERSION', 3))
