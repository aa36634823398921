"""Words a lesson's sentence says about a measured value, chosen here, one
function per kind of choice, so that the lesson's cells keep only the
experiment in view (tests/test_words.py checks each on both backends)."""


def faster_or_slower(seconds, than_seconds):
    """"faster" when ``seconds`` took less time than ``than_seconds``,
    "no faster" when the two are equal (round both to the digits the
    sentence shows), else "slower"."""
    if seconds == than_seconds:
        return "no faster"
    return "faster" if seconds < than_seconds else "slower"


def less_or_more(value, than_value):
    """"less" when ``value`` is below ``than_value``, else "more"."""
    return "less" if value < than_value else "more"


def time_than(ms, than_ms, digits=3):
    """How ``ms`` compares with ``than_ms`` as a sentence says it: "as much
    time as" when the two agree to the ``digits`` a table shows, else "less
    time than" or "more time than"."""
    if f"{ms:.{digits}g}" == f"{than_ms:.{digits}g}":
        return "as much time as"
    return "less time than" if ms < than_ms else "more time than"


def on_backend(gpu, cpu, backend=None):
    """The note that is true of the backend that ran the lesson: ``gpu`` on
    a GPU, ``cpu`` on the CPU device model (``backend``: this run's
    ``src.BACKEND``, read at the call, as tools/gpu/rehearse.py sets it)."""
    if backend is None:
        from . import BACKEND as backend
    return gpu if backend == "gpu" else cpu


def times_as_long(ratio, digits=1):
    """How a time compares with another, from their ratio, as a sentence
    says it: "2.1 times as long", "about as long" when the ratio shows as 1
    at the ``digits`` a table shows, else "less time (0.80 times as
    long)"."""
    shown = f"{ratio:.{digits}f}"
    if float(shown) == 1:
        return "about as long"
    if ratio < 1:
        return f"less time ({ratio:.2f} times as long)"
    return f"{shown} times as long"


def grew_or_shrank(before, after, tolerance=1.1):
    """How a value changed from ``before`` to ``after`` as a sentence says
    it: "grew" or "shrank" when one is more than ``tolerance`` times the
    other, else "stayed about the same" (a run's noise moves the lessons'
    ratios by a few percent)."""
    if max(before, after) <= tolerance * min(before, after):
        return "stayed about the same"
    return "grew" if after > before else "shrank"


def ranges_apart(waited_min, other_max, note):
    """``note`` (a sentence that explains it) when the calls that waited
    were not all slower than the calls that did not, ``""`` when the
    slowest of the others (``other_max``) was faster than the fastest
    that waited (``waited_min``)."""
    return "" if waited_min > other_max else note
