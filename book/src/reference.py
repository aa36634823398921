"""A real GPU's numbers beside this run's: the book's reference runs.

``book/reference/<device>.json`` holds what each lesson glued when it ran on
a real GPU (``nvidia-h100`` by default), with the device, the software
versions, the date and the commit of that run. A lesson opens a `Lesson`
and glues through it::

    ref = Lesson("01_devices")
    ref.glue("first_ms", first_ms, display=False)

which glues ``first_ms`` as `myst_nb.glue` does and, beside it,
``first_ms_ref``: the reference GPU's value as text, so that prose can say
"{glue:text}`first_ms:.3f` ms here, {glue:text}`first_ms_ref` ms on the
H100". ``ref.compare()`` shows every value the lesson glued, this run's and
the reference's, side by side.

Each reference value is in one of three states, shown wherever it appears:

* **current**: the code cell that glues it is the one that ran on the GPU;
* **stale**: that cell has changed since the GPU ran it (the value is
  shown, marked "stale");
* **not captured**: no GPU run has glued it yet.

A few glued values are not measurements (a size the lesson chose, a figure
quoted from a source); ``book/reference/exclusions.json`` lists them, each
with its reason, and they get no reference.
"""
import ast
import hashlib
import json
import math
from pathlib import Path

BOOK = Path(__file__).resolve().parents[1]
REFERENCE_DIR = BOOK / "reference"
DEFAULT_DEVICE = "nvidia-h100"
EXCLUSIONS = REFERENCE_DIR / "exclusions.json"
REF_SUFFIX = "_ref"

CURRENT, STALE, NOT_CAPTURED, EXCLUDED = (
    "current", "stale", "not captured", "excluded")


# -- reading notebooks and reference files ------------------------------------
def fingerprint(source):
    """A short hash of a cell's code, blind to blank lines and trailing
    spaces: two cells with the same code have the same fingerprint."""
    lines = [ln.rstrip() for ln in source.splitlines() if ln.strip()]
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]


def parse_glued(text):
    """A glued value from its ``text/plain`` form: a number, string, list
    or dict where Python can read it back, else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def glued_outputs(nb):
    """``{key: (cell_index, cell_source, value)}`` for every value glued in
    the stored outputs of notebook ``nb`` (a dict, as json.load reads it)."""
    found = {}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = _text(cell["source"])
        for out in cell.get("outputs", []):
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name is None:
                continue
            data = out.get("data", {})
            text = next((_text(v) for k, v in data.items()
                         if k.endswith("text/plain")), None)
            found[name] = (i, source, None if text is None
                           else parse_glued(text))
    return found


def _text(value):
    return "".join(value) if isinstance(value, list) else value


def reference_path(device=DEFAULT_DEVICE):
    return REFERENCE_DIR / f"{device}.json"


def load(device=DEFAULT_DEVICE):
    """The reference of ``device``; an empty one if none was captured."""
    path = reference_path(device)
    if not path.exists():
        return {"device": {"name": device}, "lessons": {}}
    return json.loads(path.read_text())


def load_exclusions():
    """``{lesson: {key: reason}}``: glued values that get no reference."""
    if not EXCLUSIONS.exists():
        return {}
    return json.loads(EXCLUSIONS.read_text())


def current_fingerprints(lesson):
    """``{key: fingerprint}`` of the cells that glue each key in the lesson
    as it is on disk now."""
    path = BOOK / f"{lesson}.ipynb"
    if not path.exists():
        return {}
    nb = json.loads(path.read_text())
    found = {k: fingerprint(src) for k, (_, src, _) in
             glued_outputs(nb).items()}
    # A key glued by a cell that has not run yet: find the cell by name.
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = _text(cell["source"])
            for key in _literal_keys(src):
                found.setdefault(key, fingerprint(src))
    return found


def _literal_keys(source):
    """Names glued with a literal string in ``source``."""
    keys = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return keys
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and \
                getattr(node.func, "attr", getattr(node.func, "id", "")) \
                == "glue" and isinstance(node.args[0], ast.Constant) and \
                isinstance(node.args[0].value, str):
            keys.append(node.args[0].value)
    return keys


def status_of(entry, now):
    """State of a reference ``entry`` (or None) given the fingerprint of
    the cell that glues it now (or None)."""
    if entry is None:
        return NOT_CAPTURED
    if now is not None and entry.get("cell") == now:
        return CURRENT
    return STALE


def format_value(value):
    """A number as a reader wants it in a sentence: three significant
    digits, thousands grouped; anything else as text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) or abs(value) >= 1000:
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    return f"{value:.3g}"


# -- in a lesson ----------------------------------------------------------------
class Lesson:
    """The reference run of one lesson, and this run's glued values."""

    def __init__(self, lesson, device=DEFAULT_DEVICE):
        self.lesson = lesson
        self.device = device
        reference = load(device)
        self.info = reference.get("device", {})
        self.run_info = {k: reference.get(k) for k in ("date", "commit",
                                                      "source")}
        self.entries = reference.get("lessons", {}).get(lesson, {}).get(
            "values", {})
        self.exclusions = load_exclusions().get(lesson, {})
        self.now = current_fingerprints(lesson)
        self.values = {}

    @property
    def device_name(self):
        return self.info.get("name", self.device)

    def status(self, key):
        """``current``, ``stale``, ``not captured`` or ``excluded``."""
        if key in self.exclusions:
            return EXCLUDED
        return status_of(self.entries.get(key), self.now.get(key))

    def reference(self, key):
        """The reference GPU's value of ``key``, or None."""
        entry = self.entries.get(key)
        return None if entry is None else entry.get("value")

    def reference_text(self, key):
        """The reference value as prose shows it, with its state."""
        state = self.status(key)
        if state in (NOT_CAPTURED, EXCLUDED):
            return state
        text = format_value(self.reference(key))
        return text if state == CURRENT else f"{text} (stale)"

    def glue(self, name, value, display=True):
        """`myst_nb.glue` ``name``, and ``name + '_ref'`` beside it."""
        from myst_nb import glue
        glue(name, value, display=display)
        self.values[name] = value
        if name not in self.exclusions:
            glue(name + REF_SUFFIX, self.reference_text(name), display=False)

    def rows(self):
        """``(key, this run, reference, state)`` for every glued value."""
        return [(k, format_value(v), "" if self.status(k) in (
                    NOT_CAPTURED, EXCLUDED) else format_value(
                    self.reference(k)), self.status(k))
                for k, v in self.values.items()]

    def compare(self):
        """Show this run's glued values beside the reference GPU's."""
        from IPython.display import HTML, display
        from html import escape
        head = (f"<p><b>This run beside the {escape(self.device_name)}"
                "</b> (reference captured "
                f"{escape(str(self.run_info.get('date') or 'never'))}, "
                f"commit {escape(str(self.run_info.get('commit') or '-'))}"
                "; <i>stale</i>: the cell that measures it has changed "
                "since).</p>")
        rows = "".join(
            f"<tr><td><code>{escape(k)}</code></td><td>{escape(a)}</td>"
            f"<td>{escape(b)}</td><td>{escape(s)}</td></tr>"
            for k, a, b, s in self.rows())
        display(HTML(
            f"{head}<table><thead><tr><th>value</th><th>this run</th>"
            f"<th>{escape(self.device_name)}</th><th>reference</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>"))


# -- writing a reference ---------------------------------------------------------
def from_notebooks(paths, device_info, date, commit, source):
    """A reference built from executed lessons (``*.ipynb`` with outputs):
    every glued value with the fingerprint of the cell that glued it."""
    lessons = {}
    for path in sorted(Path(p) for p in paths):
        nb = json.loads(Path(path).read_text())
        values = {key: {"value": value, "cell": fingerprint(src)}
                  for key, (_, src, value) in glued_outputs(nb).items()
                  if not key.endswith(REF_SUFFIX)}
        lessons[path.stem] = {"values": values}
    return {"device": device_info, "date": date, "commit": commit,
            "source": source, "lessons": lessons}


def write(reference, device=DEFAULT_DEVICE):
    path = reference_path(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    return path
