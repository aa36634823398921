"""Handing arrays to and from other libraries on the CPU device model
(CuPy's ``_core``: ``__cuda_array_interface__``, and ``_core.dlpack``),
held to CuPy 14.2's behaviour and errors: the memory is shared (zero copy),
and a consumer on another stream sees the producer's work only after the
ordering the protocol gives. Without it the consumer reads too early: the
race is real on the model, and shown here deterministically, with a gate
holding the producer's stream. Ordering is tested with gates, never with
timing; every wait has a timeout."""
import threading
import warnings
import weakref

import numpy
import pytest

import src.cpudevice as cp
from modelkit import (WAIT_S, Gate, cai_settings, dlpack_capsules_held,
                      wait_until)


class Interface:
    """Another library's array: it has only ``__cuda_array_interface__``
    (a copy of the one given, or of ``a``'s at the time it is made)."""

    def __init__(self, a=None, **desc):
        self.desc = dict(a.__cuda_array_interface__ if a is not None
                         else {}, **desc)

    @property
    def __cuda_array_interface__(self):
        return self.desc


@pytest.fixture
def streams():
    """Two non-blocking streams: a producer's and a consumer's."""
    a = cp.cuda.Stream(non_blocking=True)
    b = cp.cuda.Stream(non_blocking=True)
    yield a, b
    a.synchronize()
    b.synchronize()


def produce(producer, value=7.0, n=4):
    """``(x, gate)``: zeros, then filled with ``value`` on ``producer``
    behind a closed gate (the fill waits for ``gate.open()``)."""
    x = cp.zeros(n)
    x.data.device.synchronize()
    gate = Gate().hold_stream(producer)
    with producer:
        x.fill(value)
    return x, gate


# -- __cuda_array_interface__: export -----------------------------------------

def test_interface_is_version_3_with_the_current_stream():
    x = cp.arange(6.0).reshape(2, 3)
    desc = x.__cuda_array_interface__
    assert desc == {"shape": (2, 3), "typestr": "<f8",
                    "descr": [("", "<f8")], "stream": 1, "version": 3,
                    "strides": None, "data": (x.data.ptr, False)}
    s = cp.cuda.Stream()
    with s:
        assert x.__cuda_array_interface__["stream"] == s.ptr
    with cp.cuda.Stream.ptds:
        assert x.__cuda_array_interface__["stream"] == 2
    assert x.T.__cuda_array_interface__["strides"] == (8, 24)
    assert cp.empty(0).__cuda_array_interface__["data"] == (0, False)


def test_export_version_2_names_no_stream(monkeypatch):
    x = cp.arange(3.0)
    cai_settings(monkeypatch, export_version=2)
    desc = x.__cuda_array_interface__
    assert desc["version"] == 2 and "stream" not in desc
    cai_settings(monkeypatch, export_version=4)
    with pytest.raises(ValueError, match="can only be set to 3"):
        x.__cuda_array_interface__


# -- __cuda_array_interface__: import -----------------------------------------

def test_asarray_views_the_memory_and_array_copies_it():
    x = cp.arange(6.0).reshape(2, 3)
    y = cp.asarray(Interface(x))
    assert y.data.ptr == x.data.ptr and y.shape == (2, 3)
    assert isinstance(y.data.mem, cp.cuda.UnownedMemory)
    y[0, 0] = 42
    assert float(x[0, 0]) == 42             # one buffer: zero copy
    z = cp.array(Interface(x))
    assert z.data.ptr != x.data.ptr
    numpy.testing.assert_array_equal(z.get(), x.get())
    t = cp.asarray(Interface(x.T))          # strides travel
    numpy.testing.assert_array_equal(t.get(), x.get().T)


def test_the_consumer_keeps_the_producer_alive():
    x = cp.arange(3.0)
    owner = Interface(x)
    ref = weakref.ref(owner)
    y = cp.asarray(owner)
    del owner, x
    assert ref() is not None                # UnownedMemory holds it
    numpy.testing.assert_array_equal(y.get(), [0.0, 1.0, 2.0])
    del y
    assert ref() is None


def test_import_synchronizes_the_named_stream(streams, monkeypatch):
    """With the default CUPY_CUDA_ARRAY_INTERFACE_SYNC=1, asarray waits on
    the host for the producer's stream: the consumer sees its work."""
    producer, consumer = streams
    x, gate = produce(producer)
    with producer:
        obj = Interface(x)
    synced = []
    real = cp.cuda.runtime.streamSynchronize

    def spy(ptr):
        synced.append(ptr)
        real(ptr)
    monkeypatch.setattr(cp.cuda.runtime, "streamSynchronize", spy)
    out = []

    def consume():
        with consumer:
            out.append((cp.asarray(obj) * 1).get())
    t = threading.Thread(target=consume)
    t.start()
    assert wait_until(lambda: synced == [producer.ptr])
    assert t.is_alive()                     # held until the producer runs
    gate.open()
    t.join(WAIT_S)
    assert not t.is_alive()
    numpy.testing.assert_array_equal(out[0], [7.0] * 4)


def test_without_sync_a_consumer_on_another_stream_reads_too_early(
        streams, monkeypatch):
    producer, consumer = streams
    cai_settings(monkeypatch, sync=False)
    x, gate = produce(producer)
    with producer:
        obj = Interface(x)
    with consumer:
        early = (cp.asarray(obj) * 1).get()
    gate.open()
    producer.synchronize()
    numpy.testing.assert_array_equal(early, [0.0] * 4)      # the race
    numpy.testing.assert_array_equal(x.get(), [7.0] * 4)


def test_without_sync_an_event_orders_the_consumer(streams, monkeypatch):
    producer, consumer = streams
    cai_settings(monkeypatch, sync=False)
    x, gate = produce(producer)
    with producer:
        obj, done = Interface(x), producer.record()
    consumer.wait_event(done)
    with consumer:
        y = cp.asarray(obj) * 1
    gate.open()
    numpy.testing.assert_array_equal(y.get(stream=consumer), [7.0] * 4)


def test_an_interface_without_a_stream_is_not_synchronized(monkeypatch):
    calls = []
    monkeypatch.setattr(cp.cuda.runtime, "streamSynchronize", calls.append)
    x = cp.arange(3.0)
    desc = dict(x.__cuda_array_interface__, version=2)
    del desc["stream"]
    cp.asarray(Interface(**desc))
    cp.asarray(Interface(x, stream=None))
    assert calls == []


def test_import_errors_are_cupys():
    x = cp.arange(3.0)
    with pytest.raises(ValueError, match="big-endian"):
        cp.asarray(Interface(x, typestr=">f8"))
    with pytest.raises(ValueError, match="masked arrays"):
        cp.asarray(Interface(x, mask=(0, False)))
    with pytest.raises(TypeError, match="Expected tuple, got list"):
        cp.asarray(Interface(x, shape=[3]))
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="invalid resource handle"):
        cp.asarray(Interface(x, stream=987654321))
    with pytest.raises(RuntimeError, match="explicit device ID"):
        cp.asarray(Interface(x, data=(0, False)))


def test_memory_the_model_does_not_have_is_refused():
    host = numpy.zeros(4)
    obj = Interface(shape=(4,), typestr="<f8", data=(host.ctypes.data, False),
                    version=3, strides=None)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError,
                       match="not inside memory of the CPU device model"):
        cp.asarray(obj)


# -- DLPack: the producer -----------------------------------------------------

def test_dlpack_device_says_cuda_or_managed():
    assert cp.arange(3).__dlpack_device__() == (2, 0)
    with cp.cuda.Device(1):
        assert cp.arange(3).__dlpack_device__() == (2, 1)
    mem = cp.cuda.malloc_managed(64)
    managed = cp.ndarray((8,), cp.float64, mem)
    assert managed.__dlpack_device__() == (13, 0)


def test_capsules_are_pycapsules_numpy_refuses_as_it_refuses_cupys():
    x = cp.arange(4.0)
    assert repr(x.__dlpack__()).startswith('<capsule object "dltensor" ')
    assert 'dltensor_versioned' in repr(x.__dlpack__(max_version=(1, 0)))
    with pytest.raises(RuntimeError, match="Unsupported device in DLTensor"):
        numpy.from_dlpack(x)
    numpy.testing.assert_array_equal(numpy.from_dlpack(x, device="cpu"),
                                     [0.0, 1.0, 2.0, 3.0])


def test_dlpack_export_errors_are_cupys():
    x = cp.arange(3.0)
    with pytest.raises(BufferError, match="copy=True only supported"):
        x.__dlpack__(copy=True)
    with pytest.raises(ValueError, match="without copy"):
        x.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="unsupported device requested"):
        x.__dlpack__(dl_device=(2, 1))
    with pytest.raises(ValueError, match="valid stream for the DLPack"):
        x.__dlpack__(stream=-5)
    with pytest.raises(TypeError, match="max_version"):
        x.__dlpack__(max_version=[1, 0])
    with pytest.warns(UserWarning, match="Stream 0 is passed"):
        x.__dlpack__(stream=0)


def test_an_unconsumed_capsule_lets_its_array_go():
    x = cp.arange(3.0)
    ref = weakref.ref(x)
    capsule = x.__dlpack__()
    del x
    assert ref() is not None                # the capsule keeps it
    del capsule
    cp.from_dlpack(cp.zeros(1))             # the model's next DLPack call
    assert ref() is None and dlpack_capsules_held() == 0


# -- DLPack: the consumer -----------------------------------------------------

def test_from_dlpack_shares_the_memory():
    x = cp.arange(6.0).reshape(2, 3)
    y = cp.from_dlpack(x)
    assert y.data.ptr == x.data.ptr and y.shape == (2, 3)
    y[1, 2] = -1
    assert float(x[1, 2]) == -1
    numpy.testing.assert_array_equal(cp.from_dlpack(x.T).get(), x.get().T)
    for dtype in (cp.int8, cp.uint16, cp.float32, cp.complex128, cp.bool_):
        assert cp.from_dlpack(cp.zeros(2, dtype)).dtype == dtype


def test_from_dlpack_orders_the_consumer_after_the_producer(streams):
    """The consumer hands its stream to ``__dlpack__``: the producer's
    stream records an event and the consumer's waits for it; the host
    does not wait."""
    producer, consumer = streams
    x, gate = produce(producer)
    with producer:
        capsule = x.__dlpack__(stream=consumer.ptr)
    with consumer:
        y = cp.from_dlpack(capsule) * 1
    assert not consumer.done                # waits for the producer
    gate.open()
    numpy.testing.assert_array_equal(y.get(stream=consumer), [7.0] * 4)


@pytest.mark.parametrize("how", ["stream -1", "exported on the consumer"])
def test_dlpack_given_the_wrong_stream_reads_too_early(streams, how):
    producer, consumer = streams
    x, gate = produce(producer)
    with consumer:
        if how == "stream -1":
            y = cp.from_dlpack(x.__dlpack__(stream=-1)) * 1
        else:       # from_dlpack under the consumer: no order to the producer
            y = cp.from_dlpack(x) * 1
        early = y.get()
    gate.open()
    numpy.testing.assert_array_equal(early, [0.0] * 4)


def test_from_dlpack_refuses_what_cupy_refuses():
    with pytest.raises(TypeError, match="CPU arrays cannot be directly"):
        cp.from_dlpack(numpy.arange(3))
    with pytest.raises(RuntimeError, match="different from the backend"):
        cp.from_dlpack(numpy.arange(3).__dlpack__())
    with pytest.raises(ValueError, match="cannot be consumed multiple"):
        cp.from_dlpack(object())
    x = cp.arange(3)
    capsule = x.__dlpack__()
    cp.from_dlpack(capsule)
    with pytest.raises(ValueError, match="cannot be consumed multiple"):
        cp.from_dlpack(capsule)
    with pytest.raises(NotImplementedError, match="does not support device"):
        cp.from_dlpack(x, device=(2, 0))

    class Odd:
        def __dlpack_device__(self):
            return (99, 0)
    with pytest.raises(TypeError, match="Unsupported array type: 99"):
        cp.from_dlpack(Odd())


def test_a_producer_without_max_version_is_asked_again():
    x = cp.arange(3.0)

    class Old:
        def __dlpack_device__(self):
            return x.__dlpack_device__()

        def __dlpack__(self, stream=None):
            return x.__dlpack__(stream=stream)
    assert cp.from_dlpack(Old()).data.ptr == x.data.ptr


def test_to_and_from_dlpack_are_deprecated():
    x = cp.arange(3.0)
    with pytest.warns(cp.VisibleDeprecationWarning, match="from_dlpack"):
        capsule = x.toDlpack()
    assert "dltensor_versioned" in repr(capsule)
    with pytest.warns(cp.VisibleDeprecationWarning, match="from_dlpack"):
        y = cp.fromDlpack(capsule)
    assert y.data.ptr == x.data.ptr
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cp.from_dlpack(x)
