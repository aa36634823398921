"""How reference values read: in a sentence (`format_value`) and in the
table `Lesson.compare` shows (`compare_table`), with the labels the
lessons' own tables give each value (`table_labels`)."""
import math
import numbers
import re

from .store import EXCLUDED, NOT_CAPTURED, STALE


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


#: The mark a stale reference value carries wherever it is shown; the
#: page explains it once (`Lesson.compare`), and only if it has one.
STALE_MARK = "\u2020"

#: What a table shows where the reference has no value.
MISSING = "\u2014"


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
    json.load reads it; raw markdown cells too, as the book reads them),
    a later table's label winning."""
    from .prose import is_markdown
    found = {}
    for cell in nb["cells"]:
        if is_markdown(cell):
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


def compare_table(device_name, date, commit, rows, labels=None, origin=None,
                  others=()):
    """The HTML `Lesson.compare` shows, from ``rows`` of ``(key, this
    run, reference, state)``: a line on the capture (``date`` and
    ``commit`` None: never captured), the stale mark explained when a
    row is stale, and a collapsed table of the numbers with readable
    ``labels`` (``{key: label}``; `key_label` for the rest). Words and
    figure data are left out (the prose shows them). Each row carries its
    key as ``data-key``. Where some values come from other reference
    devices than ``device_name``: ``origin`` (``{key: "H100"}``) labels
    them, and ``others`` (``[(name, short name, date, commit)]``) says
    when those devices ran the lesson."""
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
    origin = origin or {}
    for name, short, other_date, other_commit in others:
        when = capture_words(other_date, other_commit)
        head += (f"<p>Values marked ({escape(short)}) are the "
                 f"{escape(name)}'s, from its run of this lesson"
                 f"{f' ({escape(when)})' if when else ''}: the {device} "
                 f"has no current value of them.</p>")
    if any(s == STALE for _, _, _, s in rows):     # words too: prose
        head += (f"<p>{STALE_MARK} <i>Stale</i>: the cell that measures "
                 f"the value, or code it calls, has changed since the "
                 f"{device} ran it.</p>")
    body = "".join(
        f'<tr data-key="{escape(k)}"><td>'
        f"{escape(labels.get(k) or key_label(k))}</td><td>{escape(a)}</td>"
        + ("" if never else f"<td>{escape(_reference_cell(b, s))}"
           f"{escape(f' ({origin[k]})') if k in origin else ''}</td>")
        + "</tr>"
        for k, a, b, s in shown)
    beside = "" if never else f" beside the {device}'s"
    column = "" if never else f"<th>{device}</th>"
    return (f"{head}<details class=\"reference-compare-details\"><summary>"
            f"This run's {len(shown)} numbers{beside}"
            f'</summary><table class="reference-compare"><thead><tr>'
            f"<th>value</th><th>this run</th>{column}</tr>"
            f"</thead><tbody>{body}</tbody></table></details>")
