"""The misuse catalogue: each mistake a reader is likely to make raises the
exception class CuPy raises, with a message that says what to do. The table
in book/misuse.ipynb lists the same entries (a test keeps them in step),
below the performance mistakes the page measures."""
import json
import os
import re

import numpy
import pytest

import subproc
import src.cpudevice as cp
from src import loops, twins
from src.reference.prose import as_book

BOOK = os.path.join(os.path.dirname(__file__), "..", "book")
CUDAError = cp.cuda.runtime.CUDARuntimeError


@twins.register("misuse_scale")
def _scale(x, y):
    numpy.multiply(x, 2, out=y)


_scale_kernel = cp.ElementwiseKernel("float32 x", "float32 y", "y = 2 * x",
                                     "misuse_scale")


def device_out_of_range():
    with cp.cuda.Device(cp.cuda.runtime.getDeviceCount()):
        pass


def elapsed_unrecorded():
    cp.cuda.get_elapsed_time(cp.cuda.Event(), cp.cuda.Event())


def capture_null():
    cp.cuda.Stream.null.begin_capture()


def sync_in_capture():
    s = cp.cuda.Stream(non_blocking=True)
    s.begin_capture()
    try:
        s.synchronize()
    finally:
        try:
            s.end_capture()
        except CUDAError:
            pass


def end_without_begin():
    cp.cuda.Stream(non_blocking=True).end_capture()


def set_shape():
    cp.zeros(4, cp.float32).set(numpy.zeros(5, numpy.float32))


def set_dtype():
    cp.zeros(4, cp.float32).set(numpy.zeros(4))


def get_out_shape():
    cp.zeros(4).get(out=numpy.empty(5))


def kernel_dtype():
    _scale_kernel(cp.ones(3))          # float64 into a float32 kernel


def broadcast():
    cp.ones((3, 4)) + cp.ones(3)


def beyond_capacity():
    cp.empty(cp.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"] + 1,
             cp.uint8)


def beyond_limit():
    pool = cp.get_default_memory_pool()
    pool.set_limit(size=1 << 20)
    try:
        cp.empty(2 << 20, cp.uint8)
    finally:
        pool.set_limit(size=0)


def negative_size():
    cp.empty(-3)


def other_device():
    with cp.cuda.Device(1):
        y = cp.ones(3)
    cp.ones(3) + y


def host_array_operand():
    cp.ones(3) + numpy.ones(3)


def stream_of_other_device():
    with cp.cuda.Device(1):
        s = cp.cuda.Stream()
    with s:
        pass


def fori_loop_shape_change():
    loops.fori_loop(0, 3, lambda i, x: x[1:] + x[:-1], loops.cp.ones(10))


def gpu_backend_without_gpu():
    r = subproc.run_code("import src", backend="gpu")
    if r.returncode:
        raise RuntimeError(r.stderr.strip().splitlines()[-1])


# (misuse, exception class, what the message must say)
CATALOGUE = [
    (device_out_of_range, CUDAError, r"invalid device ordinal.*ids 0 to"),
    (elapsed_unrecorded, CUDAError, r"invalid resource handle.*recorded"),
    (capture_null, RuntimeError, r"default \(legacy\) stream.*non_blocking"),
    (sync_in_capture, CUDAError, r"capturing.*end the capture first"),
    (end_without_begin, CUDAError, r"needs a begin_capture"),
    (set_shape, ValueError, r"Shape mismatch.*reshape it first"),
    (set_dtype, TypeError, r"cannot be set to float32.*astype"),
    (get_out_shape, ValueError, r"Shape mismatch.*array's shape"),
    (kernel_dtype, TypeError, r"Type is mismatched.*astype"),
    (broadcast, ValueError, r"could not be broadcast.*must match or be 1"),
    (beyond_capacity, cp.cuda.memory.OutOfMemoryError,
     r"^Out of memory allocating [\d,]+ bytes \(allocated so far: "
     r"[\d,]+ bytes\)\.$"),                  # CuPy's text, word for word
    (beyond_limit, cp.cuda.memory.OutOfMemoryError,
     r"limit set to: 1,048,576 bytes\)\.$"),
    (negative_size, ValueError, r"negative dimensions are not allowed"),
    (other_device, ValueError, r"different from the current device.*asarray"),
    (host_array_operand, TypeError, r"host.*cp\.asarray"),
    (stream_of_other_device, RuntimeError, r"does not match with the "
                                           r"current device"),
    (fori_loop_shape_change, ValueError, r"shape of the carry from \(10,\) "
                                         r"to \(9,\).*same shape"),
    (gpu_backend_without_gpu, RuntimeError, r"BOOK_BACKEND=gpu.*"
                                            r"BOOK_BACKEND=cpu"),
]


@pytest.mark.parametrize("misuse, exc, says", CATALOGUE,
                         ids=[m.__name__ for m, *_ in CATALOGUE])
def test_misuse_raises_cupys_exception_with_advice(misuse, exc, says):
    if misuse is gpu_backend_without_gpu:
        import cupy
        if cupy.is_available():
            pytest.skip("this machine has a usable GPU")
    with pytest.raises(exc) as e:
        misuse()
    assert re.search(says, str(e.value), re.S), str(e.value)


def page_cells():
    with open(os.path.join(BOOK, "misuse.ipynb")) as f:
        return [(c["cell_type"], "".join(c["source"]),
                 c.get("metadata", {}).get("tags", []))
                for c in as_book(json.load(f))["cells"]]


def page_markdown():
    return "\n\n".join(s for kind, s, _ in page_cells()
                        if kind == "markdown")


def test_catalogue_is_listed_in_the_docs():
    text = page_markdown()
    for misuse, exc, _ in CATALOGUE:
        assert f"`{misuse.__name__}`" in text, misuse.__name__
        assert exc.__name__ in text


#: The performance mistakes the page measures, by the words of their
#: headings, and the chapter each links (issue 31, item 6).
PERFORMANCE = {
    "Timing without a wait": "04_1_queueing",
    "A first launch inside a timing": "01_1_runtime",
    "A pageable buffer with `blocking=False`": "06_2_async",
    "Pinned allocation inside a loop": "06_1_bandwidth",
    "A missing `wait_event`": "05_1_queues",
    "`.get()` on the stream that computes": "04_3_ahead",
}


def sections():
    """``{heading: (markdown, code in view)}`` of the page's sections."""
    found, heading = {}, None
    for kind, source, tags in page_cells():
        if kind == "markdown" and source.startswith("## "):
            heading = source.splitlines()[0][3:]
            found[heading] = ([], [])
        if heading is None:
            continue
        if kind == "markdown":
            found[heading][0].append(source)
        elif "remove-cell" not in tags:
            found[heading][1].append(source)
    return {h: ("\n".join(md), "\n".join(code))
            for h, (md, code) in found.items()}


@pytest.mark.parametrize("mistake", PERFORMANCE)
def test_each_performance_mistake_is_measured_fixed_and_linked(mistake):
    """Each performance mistake has its experiment in view, its measured
    cost glued into prose, a fix, and a link to the chapter that teaches
    it; numbers in its prose are glued, never typed."""
    [heading] = [h for h in sections() if mistake in h]
    prose, code = sections()[heading]
    assert "Benchmark" in code or "race(" in code or "infer(" in code
    assert "{glue:text}`" in prose
    assert "**Fix:**" in prose
    assert f"]({PERFORMANCE[mistake]}.ipynb)" in prose
    typed = re.sub(r"\{glue(?::\w+)?\}`[^`]*`|\]\([^)]*\)|`[^`]*`", "",
                   prose)
    assert not re.search(r"\d+(\.\d+)? ?(ms|us|µs|s|MiB|GB/s|times)\b",
                         typed), (heading, typed)


def test_the_reference_appears_only_where_it_was_captured():
    """A clause about the reference GPU is glued in a cell the page
    hides, and no stored output says "not captured"."""
    for kind, source, tags in page_cells():
        if kind == "code" and "clause(" in source and "def " not in source:
            assert "remove-cell" in tags, source[:60]
    with open(os.path.join(BOOK, "misuse.ipynb")) as f:
        outputs = [o for c in json.load(f)["cells"]
                   for o in c.get("outputs", [])]
    assert "not captured" not in page_markdown() + json.dumps(outputs)
