"""`Lesson`: a lesson's glued values with the reference GPU's beside them.

How a value reads in prose (`format_value`), the figure data `Lesson.data`
glues (`FigureData`), and the table `Lesson.compare` shows.
"""
import ast
import json
import math
import numbers
import re
import string

from .store import (
    CURRENT, DEVICE_KEYS, EXCLUDED, FIGURE_DATA, NOT_CAPTURED, PROFILE_KEYS,
    REF_SUFFIX, STALE, _entries, current_fingerprints, default_device, load,
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
    """A string whose ``repr`` pastes as written: myst_nb reads a glued
    ``text/plain`` as a Python literal, so a text that would read as
    another value ("2,929" as a tuple of two numbers) is quoted, and any
    other is itself (no quotes, an apostrophe or not). Every text is also
    Markdown, so that a sentence can paste with ``{glue:md}`` a text
    that quotes code in backticks, whatever this run's words are."""

    def __repr__(self):
        text = str(self)
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError,
                RecursionError):
            return text
        return text if str(value) == text else repr(text)

    def _repr_markdown_(self):
        """The text as Markdown, for ``{glue:md}``: ``{glue:text}`` would
        show the backticks of a text that quotes code (```set```)."""
        return str(self)


#: The mark a stale reference value carries wherever it is shown; the
#: page explains it once (`Lesson.compare`), and only if it has one.
STALE_MARK = "\u2020"

#: What a table shows where the reference has no value.
MISSING = "\u2014"


class MissingReference(KeyError):
    """A clause names a reference value that was not captured."""


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
        self.now = current_fingerprints(lesson, entries=self.entries)
        from .glue import GluedValues
        self.values, self.series = GluedValues(lesson), {}

    @property
    def captured(self):
        """Whether the reference run measured any value of this lesson."""
        return bool(self.entries)

    @property
    def device_name(self):
        return self.info.get("name", self.device)

    @property
    def gpu(self):
        """The reference device's name as prose says it ("NVIDIA H100")."""
        return short_name(self.device_name)

    @property
    def gpu_short(self):
        """`gpu` without its maker ("H100")."""
        maker, _, model = self.gpu.partition(" ")
        return model if maker.upper() in ("NVIDIA", "AMD") and model \
            else self.gpu

    def glue_device(self):
        """Glue the reference device's name for prose, so that no sentence
        names it by hand: ``ref_gpu`` ("NVIDIA H100") and ``ref_gpu_short``
        (without its maker: "H100"). Not measurements: no ``*_ref``."""
        from .glue import glue
        for key, text in zip(DEVICE_KEYS, (self.gpu, self.gpu_short)):
            glue(key, Text(text), display=False)

    def glue_profile(self):
        """Glue the CPU device model's profile for prose (`PROFILE_KEYS`),
        so that no sentence about the model names its GPU or quotes its
        costs by hand: ``profile_gpu`` ("H100": "its {profile_gpu}
        profile"), ``profile_device`` ("NVIDIA H100": what the profile was
        measured on), ``profile_context_ms``, ``profile_stage_gbps`` and
        ``profile_h2d_gbps``. The profile is the model's on either backend
        (``BOOK_CPU_PROFILE`` or the default); not measurements: no
        ``*_ref``. Returns the glued values."""
        from .glue import glue
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
        ends in ``_ref``, like the reference values `glue` glues beside
        each value, and that no `glue` of this lesson glues; like them, it
        is never captured as a measurement of its own."""
        base = name[:-len(REF_SUFFIX)]
        if not name.endswith(REF_SUFFIX) or not base or base in self.values:
            raise ValueError(f"{name!r}: words about the reference are "
                             f"glued as 'NAME{REF_SUFFIX}', NAME not glued")
        from .glue import glue
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
        """The reference value as a table shows it: the value, with
        `STALE_MARK` when stale, or `MISSING` (a dash) when there is none.
        A sentence pastes reference values through `clause` instead."""
        state = self.status(key)
        if state in (NOT_CAPTURED, EXCLUDED):
            return MISSING
        text = format_value(self.reference(key))
        return text if state == CURRENT else text + STALE_MARK

    def clause(self, template):
        """``template`` with each ``{key}`` replaced by the reference
        text of ``key`` (``{ref_gpu}`` and ``{ref_gpu_short}``: the
        reference GPU's name), or ``""`` when any of its values is not
        current: a clause whose reference is missing, or stale (measured
        by an older version of its cell, so that a sentence could set it
        against a number it no longer matches), drops out of the
        sentence; the lesson's table of reference values still shows a
        stale one, marked. For example ``"(on the {ref_gpu_short}:
        {trip_gbs} GB/s)"``."""
        names = dict(zip(DEVICE_KEYS, (self.gpu, self.gpu_short)))
        keys = [f for _, f, _, _ in string.Formatter().parse(template)
                if f]
        try:
            return template.format_map({
                k: names[k] if k in names else self._present(k)
                for k in keys})
        except MissingReference:
            return ""

    def _present(self, key):
        if self.status(key) != CURRENT:
            raise MissingReference(key)
        return self.reference_text(key)

    def glue_clause(self, name, template):
        """Glue `clause` of ``template`` as ``name`` (``NAME_ref``, as
        `glue_ref` names words about the reference): the sentence pastes
        it where the clause goes, and it is empty when a value is
        missing."""
        self.glue_ref(name, self.clause(template))

    def glue(self, name, value, display=True):
        """`myst_nb.glue` ``name``, and ``name + '_ref'`` beside it. Text
        is glued as itself: myst_nb pastes a string's ``repr``, whose
        quotes it strips only when they are single ones, so a sentence
        with an apostrophe would show in double quotes."""
        from .glue import glue
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
        from .glue import glue
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
        """Show this run's numbers beside the reference GPU's: one plain
        line on the capture, the stale mark's explanation where a value
        carries it, and the table, collapsed."""
        from IPython.display import HTML, display
        run = self.run_info if self.captured else {}
        display(HTML(compare_table(
            self.device_name, run.get("date"), run.get("commit"),
            self.rows(), labels=self.labels())))

    def labels(self):
        """``{key: label}``: those ``book/reference/labels.json`` gives
        (where a table's words lack something, such as the unit), else
        the words the lesson's own tables give each value ("first /
        later"), its glued values filled in, else words made from the key
        (`key_label`; tests/test_labels.py fails on a number that would
        show one)."""
        from .store import _read_lesson, load_labels
        found = notebook_labels(_read_lesson(self.lesson) or {"cells": []},
                                self.values)
        listed = load_labels().get(self.lesson, {})
        return {k: listed.get(k) or found.get(k) or key_label(k)
                for k in (*self.values, *self.series)}


#: A glue role in a lesson's markdown: {glue:text}`key:format`.
_GLUE_ROLE = re.compile(r"\{glue(?::\w+)?\}`([^`:]+)(?::([^`]*))?`")

#: Units a key ends with, as a label says them.
_UNITS = {"ms": "ms", "us": "\u00b5s", "s": "s", "kib": "KiB",
          "mib": "MiB", "gib": "GiB", "gbps": "GB/s", "gb": "GB"}


def key_label(key):
    """Words for a glued key that no table of the lesson labels:
    ``"demo_v2_ms"`` reads ``"demo v2 (ms)"``."""
    words = key.split("_")
    unit = _UNITS.get(words[-1]) if len(words) > 1 else None
    if unit:
        words = words[:-1]
    text = " ".join(words)
    text = text[:1].upper() + text[1:]
    return f"{text} ({unit})" if unit else text


def table_labels(markdown, values=None):
    """``{key: label}`` from the rows of markdown tables that paste a
    value and its reference (``| label | {glue:text}`key` | ... |``):
    the first column, its glued values filled in from ``values`` and its
    markup taken out."""
    values = values or {}

    def paste(match):
        key, spec = match.group(1), match.group(2) or ""
        if key not in values:
            return key_label(key)
        try:
            return format(values[key], spec) if spec else format_value(
                values[key])
        except (TypeError, ValueError):
            return format_value(values[key])

    found = {}
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.lstrip().startswith("|"):
            continue
        keys = [m.group(1) for m in _GLUE_ROLE.finditer(cells[1])]
        row_keys = [m.group(1) for c in cells[1:] for m in
                  _GLUE_ROLE.finditer(c) if not m.group(1).endswith("_ref")]
        if len(keys) != 1 or len(row_keys) != 1 or not cells[0]:
            continue        # one value a row: its label is the row's
        label = _GLUE_ROLE.sub(paste, cells[0])
        label = re.sub(r"[`*]|\$", "", label).strip()
        found.setdefault(keys[0], label)
    return found


def notebook_labels(nb, values=None):
    """`table_labels` of every markdown cell of notebook ``nb`` (a dict, as
    json.load reads it), a later table's label winning."""
    found = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            found.update(table_labels("".join(cell["source"]), values))
    return found


def capture_words(date, commit):
    """From what, and when, the reference ran, as plain words:
    ``"commit ee28add, 2026-11-23"``; a date the record lacks is left out
    (``"not recorded (before 2026-11-23)"`` reads ``"commit ee28add"``),
    as is a commit it lacks."""
    date = str(date or "").strip()
    if not date or date.startswith("not recorded"):
        date = ""
    words = [w for w in (f"commit {commit}" if commit else "", date) if w]
    return ", ".join(words)


def is_number(text):
    """Whether ``text`` (a `format_value`) is a number a table shows."""
    return re.fullmatch(r"-?[\d,]+(\.\d+)?(e[-+]?\d+)?", text) is not None


def _reference_cell(text, state):
    if state in (NOT_CAPTURED, EXCLUDED) or not text:
        return MISSING
    return text + STALE_MARK if state == STALE else text


def compare_table(device_name, date, commit, rows, labels=None):
    """The HTML `Lesson.compare` shows, from ``rows`` of ``(key, this
    run, reference, state)``: a line on the capture (``date`` and
    ``commit`` None: never captured), the stale mark explained when a
    row is stale, and a collapsed table of the numbers with readable
    ``labels`` (``{key: label}``; `key_label` for the rest). Words and
    figure data are left out (the prose shows them). Each row carries its
    key as ``data-key``."""
    from html import escape
    labels = labels or {}
    device = escape(device_name)
    shown = [r for r in rows if is_number(r[1]) and r[3] != EXCLUDED]
    never = date is None and commit is None
    if never:
        head = (f"<p>The {device} has not run this lesson yet: the "
                "numbers below are this run's alone.</p>")
    else:
        when = capture_words(date, commit)
        head = (f"<p>The {device}'s column: this lesson as the book's "
                f"reference run measured it"
                f"{f' ({escape(when)})' if when else ''}.</p>")
    if any(s == STALE for _, _, _, s in rows):     # words too: prose
        head += (f"<p>{STALE_MARK} <i>Stale</i>: the cell that measures "
                 f"the value, or code it calls, has changed since the "
                 f"{device} ran it.</p>")
    body = "".join(
        f'<tr data-key="{escape(k)}"><td>'
        f"{escape(labels.get(k) or key_label(k))}</td><td>{escape(a)}</td>"
        + ("" if never else f"<td>{escape(_reference_cell(b, s))}</td>")
        + "</tr>"
        for k, a, b, s in shown)
    beside = "" if never else f" beside the {device}'s"
    column = "" if never else f"<th>{device}</th>"
    return (f"{head}<details class=\"reference-compare-details\"><summary>"
            f"This run's {len(shown)} numbers{beside}"
            f'</summary><table class="reference-compare"><thead><tr>'
            f"<th>value</th><th>this run</th>{column}</tr>"
            f"</thead><tbody>{body}</tbody></table></details>")
