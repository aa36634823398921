"""`Lesson`: a lesson's glued values with the reference GPU's beside them.

How a value reads in prose (`format_value`), the figure data `Lesson.data`
glues (`FigureData`), and the table `Lesson.compare` shows.
"""
import json
import math
import numbers
import re

from .store import (
    CURRENT, DEVICE_KEYS, EXCLUDED, FIGURE_DATA, NOT_CAPTURED, PROFILE_KEYS,
    REF_SUFFIX, _entries, current_fingerprints, default_device, load,
    load_exclusions, status_of)


def format_value(value):
    """A number as a reader wants it in a sentence: three significant
    digits, thousands grouped; anything else as text."""
    value = getattr(value, "data", value) if _is_display(value) else value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    return f"{value:.3g}"


def _is_display(value):
    return type(value).__module__.startswith("IPython.")


class FigureData:
    """Figure data as `Lesson.data` glues it: JSON for the record, a short
    line for anyone who displays it."""

    def __init__(self, series):
        self.series = series

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {FIGURE_DATA: self.series, "text/plain": repr(self)}

    def __repr__(self):
        return "figure data: " + ", ".join(
            f"{k} ({len(v)})" for k, v in self.series.items())


def _plain(values):
    """``values`` as plain JSON lists: NumPy and CuPy arrays included."""
    if hasattr(values, "get") and hasattr(values, "device"):   # on device
        values = values.get()
    if hasattr(values, "tolist"):
        values = values.tolist()
    if isinstance(values, (list, tuple, range)):
        return [_plain(v) for v in values]
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        return int(values)
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        return float(values)
    return values


#: Where a device's name stops naming the GPU and starts naming its
#: memory or form factor ("NVIDIA H100 80GB HBM3": "80GB").
_NAME_TAIL = re.compile(r"^(\d+\s*[GT]B|HBM\w*|GDDR\w*|SXM\w*|PCIe\w*|NVL)$",
                        re.IGNORECASE)


def short_name(device_name):
    """A GPU's name as prose says it: ``"NVIDIA H100 80GB HBM3"`` and
    ``"NVIDIA A100-SXM4-80GB"`` read ``"NVIDIA H100"``, ``"NVIDIA A100"``;
    a name with no such tail is kept whole."""
    words = []
    for word in str(device_name).split():
        head, *tail = word.split("-")       # "A100-SXM4-80GB"
        if words and _NAME_TAIL.match(head):
            break
        words.append(head if tail and _NAME_TAIL.match(tail[0]) else word)
        if words[-1] != word:
            break
    return " ".join(words)


class Text(str):
    """A string whose ``repr`` is the string itself, so that a glued
    sentence pastes as written (no quotes)."""

    def __repr__(self):
        return str(self)


class Lesson:
    """The reference run of one lesson, and this run's glued values."""

    def __init__(self, lesson, device=None):
        self.lesson = lesson
        self.device = device = device or default_device()
        reference = load(device)
        part = reference.get("lessons", {}).get(lesson, {})
        self.info = reference.get("device", {})
        self.run_info = {k: part.get(k, reference.get(k)) for k in (
            "date", "commit", "source")}
        self.entries = _entries(reference, lesson)
        self.figures = part.get("figures", [])
        self.exclusions = load_exclusions().get(lesson, {})
        self.now = current_fingerprints(lesson)
        self.values = {}
        self.series = {}

    @property
    def device_name(self):
        return self.info.get("name", self.device)

    @property
    def gpu(self):
        """The reference device's name as prose says it ("NVIDIA H100")."""
        return short_name(self.device_name)

    def glue_device(self):
        """Glue the reference device's name for prose, so that no sentence
        names it by hand: ``ref_gpu`` ("NVIDIA H100") and ``ref_gpu_short``
        (without its maker: "H100"). Not measurements: no ``*_ref``."""
        from myst_nb import glue
        full = self.gpu
        maker, _, model = full.partition(" ")
        short = model if maker.upper() in ("NVIDIA", "AMD") and model \
            else full
        for key, text in zip(DEVICE_KEYS, (full, short)):
            glue(key, Text(text), display=False)
        return full

    def glue_profile(self):
        """Glue the CPU device model's profile for prose (`PROFILE_KEYS`),
        so that no sentence about the model names its GPU or quotes its
        costs by hand: ``profile_gpu`` ("H100": "its {profile_gpu}
        profile"), ``profile_device`` ("NVIDIA H100": what the profile was
        measured on), ``profile_context_ms``, ``profile_stage_gbps`` and
        ``profile_h2d_gbps``. The profile is the model's on either backend
        (``BOOK_CPU_PROFILE`` or the default); not measurements: no
        ``*_ref``. Returns the glued values."""
        from myst_nb import glue
        from ..cpudevice._profile import Profile
        data = Profile.load().data
        values = dict(zip(PROFILE_KEYS, (
            Text(data["name"]), Text(short_name(data.get("device",
                                                          data["name"]))),
            float(data["host"]["context_create_ms"]),
            float(data["host"]["pageable_stage_gbps"]),
            float(data["copy"]["h2d_pinned_gbps"]))))
        for key, value in values.items():
            glue(key, value, display=False)
        return values

    def glue_ref(self, name, text):
        """Glue ``text``, words about the reference run that the lesson
        computed from its values (`reference`), as ``name``: a name that
        ends in ``_ref``, as the reference texts `glue` glues do, and
        that no `glue` of this lesson glues; like theirs, it is never
        captured as a measurement of its own."""
        base = name[:-len(REF_SUFFIX)]
        if not name.endswith(REF_SUFFIX) or not base or base in self.values:
            raise ValueError(f"{name!r}: words about the reference are "
                             f"glued as 'NAME{REF_SUFFIX}', NAME not glued")
        from myst_nb import glue
        glue(name, Text(text), display=False)

    def status(self, key):
        """``current``, ``stale``, ``not captured`` or ``excluded``."""
        if key in self.exclusions:
            return EXCLUDED
        return status_of(self.entries.get(key), self.now.get(key))

    def reference(self, key):
        """The reference GPU's value of ``key``, or None (figure data: the
        dict of series)."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        return entry.get("value", entry.get("series"))

    def reference_text(self, key):
        """The reference value as prose shows it, with its state."""
        state = self.status(key)
        if state in (NOT_CAPTURED, EXCLUDED):
            return state
        text = format_value(self.reference(key))
        return text if state == CURRENT else f"{text} (stale)"

    def glue(self, name, value, display=True):
        """`myst_nb.glue` ``name``, and ``name + '_ref'`` beside it. Text
        is glued as itself: myst_nb pastes a string's ``repr``, whose
        quotes it strips only when they are single ones, so a sentence
        with an apostrophe would show in double quotes."""
        from myst_nb import glue
        glue(name, Text(value) if isinstance(value, str) else value,
             display=display)
        self.values[name] = value
        if name not in self.exclusions:
            glue(name + REF_SUFFIX, Text(self.reference_text(name)),
                 display=False)

    def data(self, name, **series):
        """Record the data behind a figure: each series a list (or array)
        of numbers or labels, glued under ``name`` as JSON, not displayed.
        A capture on a GPU stores it; `reference` gives the GPU's back."""
        from myst_nb import glue
        plain = {k: _plain(v) for k, v in series.items()}
        json.dumps(plain)               # TypeError now, not at capture
        glue(name, FigureData(plain), display=False)
        self.series[name] = plain
        return plain

    def rows(self):
        """``(key, this run, reference, state)`` for every glued value and
        every figure's data."""
        rows = [(k, format_value(v), "" if self.status(k) in (
                    NOT_CAPTURED, EXCLUDED) else format_value(
                    self.reference(k)), self.status(k))
                for k, v in self.values.items()]
        rows += [(k, repr(FigureData(v)), "" if self.status(k) in (
                     NOT_CAPTURED, EXCLUDED) else repr(FigureData(
                     self.reference(k))), self.status(k))
                 for k, v in self.series.items()]
        return rows

    def compare(self):
        """Show this run's glued values beside the reference GPU's."""
        from IPython.display import HTML, display
        display(HTML(compare_table(
            self.device_name, self.run_info.get("date") or "never",
            self.run_info.get("commit") or "-", self.rows())))


def compare_table(device_name, date, commit, rows):
    """The HTML table `Lesson.compare` shows: ``rows`` of ``(key, this
    run, reference, state)``; each row carries its key as ``data-key``."""
    from html import escape
    head = (f"<p><b>This run beside the {escape(device_name)}</b> "
            f"(reference captured {escape(str(date))}, commit "
            f"{escape(str(commit))}; <i>stale</i>: the cell that measures "
            "it, or code it calls, has changed since).</p>")
    body = "".join(
        f'<tr data-key="{escape(k)}"><td><code>{escape(k)}</code></td>'
        f"<td>{escape(a)}</td><td>{escape(b)}</td>"
        f"<td>{escape(s)}</td></tr>"
        for k, a, b, s in rows)
    return (f'{head}<table class="reference-compare"><thead><tr>'
            f"<th>value</th><th>this run</th>"
            f"<th>{escape(device_name)}</th><th>reference</th></tr>"
            f"</thead><tbody>{body}</tbody></table>")
