"""`Lesson`: a lesson's glued values with the reference GPUs' beside them.

The figure data `Lesson.data` glues (`FigureData`), how prose names a GPU
(`short_name`), and the text glued values paste as (`Text`); how a value
reads and the table `Lesson.compare` shows are in `src.reference.table`.
"""
import ast
import json
import numbers
import re
import string

from .devices import device_facts
from .store import (
    CURRENT, DEVICE_KEYS, EXCLUDED, FACT_KEYS, FIGURE_DATA, NOT_CAPTURED,
    PROFILE_KEYS, REF_SUFFIX, STALE, _entries, load, load_exclusions,
    reference_devices, resolve)
from .table import (
    MISSING, STALE_MARK, compare_table, format_value, key_label,
    notebook_labels)


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


class Lesson:
    """One lesson's reference values, and this run's glued values.

    The book's reference devices come in an order (`reference_devices`):
    each value is the first device's whose run of it is current, else the
    first stale one (marked `STALE_MARK`), else not captured. The lesson's
    device (`device`, named by ``ref_gpu``) is the one that supplies most
    of its values; a value from another device carries that device's name
    ("0.97 (H100)") wherever it is shown, and a clause names the device
    behind its own values. ``device`` given: that reference alone."""

    def __init__(self, lesson, device=None):
        self.lesson = lesson
        self.devices = [device] if device else reference_devices()
        self.references = {d: load(d) for d in self.devices}
        self.exclusions = load_exclusions().get(lesson, {})
        self.sources = resolve(lesson, self.devices,
                               references=self.references,
                               exclusions={lesson: self.exclusions})
        supplied = [slug for _, slug in self.sources.values() if slug]
        self.device = max(self.devices, key=lambda d: (
            supplied.count(d), -self.devices.index(d)))
        reference = self.references[self.device]
        part = reference.get("lessons", {}).get(lesson, {})
        self.info = part.get("device", reference.get("device", {}))
        self.run_info = {k: part.get(k, reference.get(k)) for k in (
            "date", "commit", "source")}
        self.figures = part.get("figures", [])
        from .glue import GluedValues
        self.values, self.series = GluedValues(lesson), {}

    @property
    def captured(self):
        """Whether a reference run measured any value of this lesson."""
        return any(_entries(r, self.lesson) for r in self.references.values())

    @property
    def device_name(self):
        return self.name_of(self.device)

    def name_of(self, slug):
        """Reference device ``slug``'s full name ("NVIDIA H100 80GB
        HBM3"), as its run recorded it, else as the facts table gives it,
        else the slug."""
        reference = self.references.get(slug, {})
        part = reference.get("lessons", {}).get(self.lesson, {})
        name = part.get("device", reference.get("device", {})).get("name")
        return name or device_facts(slug).get("name") or slug

    def gpu_of(self, slug):
        """Device ``slug``'s name as prose says it ("NVIDIA H100")."""
        return short_name(self.name_of(slug))

    def gpu_short_of(self, slug):
        """`gpu_of` without its maker ("H100")."""
        gpu = self.gpu_of(slug)
        maker, _, model = gpu.partition(" ")
        return model if maker.upper() in ("NVIDIA", "AMD") and model \
            else gpu

    @property
    def gpu(self):
        """The lesson's reference device's name as prose says it ("NVIDIA
        H100")."""
        return self.gpu_of(self.device)

    @property
    def gpu_short(self):
        """`gpu` without its maker ("H100")."""
        return self.gpu_short_of(self.device)

    def gpu_behind(self, *keys):
        """The name, as prose says it, of the device behind ``keys``'
        reference values (the one that supplies most of them; the
        lesson's device for none): words computed from `reference`
        values name it, never the lesson's device by default."""
        behind = [self.device_of(k) for k in keys]
        slug = max(self.devices, key=lambda d: (
            behind.count(d), -self.devices.index(d)))
        return self.gpu_of(slug if any(behind) else self.device)

    def source(self, key):
        """``(state, slug)``: the state of ``key``'s reference value and
        the device it comes from (None: not captured, or excluded)."""
        if key in self.exclusions:
            return EXCLUDED, None
        found = self.sources.get(key)
        if found is not None:
            return found
        for slug in self.devices:           # not glued now: stale, if any
            if key in _entries(self.references[slug], self.lesson):
                return STALE, slug
        return NOT_CAPTURED, None

    def device_of(self, key):
        """The slug of the device ``key``'s reference value comes from,
        or None."""
        return self.source(key)[1]

    def facts(self, slug=None):
        """The published facts of device ``slug`` (default: the lesson's):
        `device_facts`."""
        return device_facts(slug or self.device)

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
        return self.source(key)[0]

    def reference(self, key):
        """The reference value of ``key`` (from the device `source` names),
        or None (figure data: the dict of series)."""
        slug = self.device_of(key)
        if slug is None:
            return None
        entry = _entries(self.references[slug], self.lesson).get(key)
        return entry.get("value", entry.get("series"))

    def label(self, key):
        """``" (H100)"`` where ``key``'s reference value comes from
        another device than the lesson's, else ``""``."""
        slug = self.device_of(key)
        if slug is None or slug == self.device:
            return ""
        return f" ({self.gpu_short_of(slug)})"

    def reference_text(self, key):
        """The reference value as a table shows it: the value, with
        `STALE_MARK` when stale and the name of its device when that is
        not the lesson's (`label`), or `MISSING` (a dash) when there is
        none. A sentence pastes reference values through `clause`
        instead."""
        state = self.status(key)
        if state in (NOT_CAPTURED, EXCLUDED):
            return MISSING
        text = format_value(self.reference(key))
        return (text if state == CURRENT else text + STALE_MARK) \
            + self.label(key)

    def clause(self, template, only=None):
        """``template`` with each ``{key}`` replaced by the reference
        text of ``key``, or ``""`` when any of its values is not current:
        a clause whose reference is missing, or stale (measured by an
        older version of its cell, so that a sentence could set it against
        a number it no longer matches), drops out of the sentence; the
        lesson's table of reference values still shows a stale one,
        marked. ``{ref_gpu}`` and ``{ref_gpu_short}`` name the device
        behind the clause's own values (the one that supplies most of
        them; a value from another device carries its name), and
        `FACT_KEYS` (``{ref_gpu_tbps}``, ...) give that device's published
        facts (a clause needing a fact the table lacks drops out too). For
        example ``"(on the {ref_gpu_short}: {trip_gbs} GB/s)"``. With
        ``only`` (a slug), the clause is a finding of that device's run:
        it drops out unless that device is the one behind its values, so
        that one GPU's finding is never said of another's numbers."""
        keys = [f for _, f, _, _ in string.Formatter().parse(template)
                if f]
        named = set(DEVICE_KEYS) | set(FACT_KEYS)
        values = [k for k in keys if k not in named]
        if any(self.status(k) != CURRENT for k in values):
            return ""
        behind = [self.device_of(k) for k in values]
        slug = max(self.devices, key=lambda d: (
            behind.count(d), -self.devices.index(d)))
        if not values:
            slug = self.device
        if only is not None and slug != only:
            return ""
        facts = device_facts(slug)
        words = dict(zip(DEVICE_KEYS, (self.gpu_of(slug),
                                       self.gpu_short_of(slug))))
        for key, field in FACT_KEYS.items():
            if field in facts:
                words[key] = format_value(facts[field])
        if any(k in FACT_KEYS and k not in words for k in keys):
            return ""
        texts = {}
        for key in values:
            text = format_value(self.reference(key))
            other = self.device_of(key)
            texts[key] = text if other == slug else \
                f"{text} ({self.gpu_short_of(other)})"
        return template.format_map({**texts, **words})

    def glue_clause(self, name, template, only=None):
        """Glue `clause` of ``template`` (``only``: a finding of that
        device's run) as ``name`` (``NAME_ref``, as `glue_ref` names words
        about the reference): the sentence pastes it where the clause
        goes, and it is empty when a value is missing."""
        self.glue_ref(name, self.clause(template, only))

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
        origin = {k: self.gpu_short_of(self.device_of(k))
                  for k, *_ in self.rows() if self.label(k)}
        others = []
        for slug in self.devices:
            if slug != self.device and any(
                    self.device_of(k) == slug for k in origin):
                part = self.references[slug].get("lessons", {}).get(
                    self.lesson, {})
                others.append((self.name_of(slug), self.gpu_short_of(slug),
                               part.get("date"), part.get("commit")))
        display(HTML(compare_table(
            self.device_name, run.get("date"), run.get("commit"),
            self.rows(), labels=self.labels(), origin=origin,
            others=others)))

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
