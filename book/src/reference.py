"""A real GPU's numbers beside this run's: the book's reference runs.

``book/reference/<device>.json`` holds what each lesson glued when it ran on
a real GPU (``nvidia-h100`` by default), with the device, the software
versions, the date and the commit of that run, the data behind the figures
where it was captured, and the figures themselves as PNG files in
``book/reference/<device>/``. A lesson opens a `Lesson` and glues through
it::

    ref = Lesson("01_devices")
    glue = ref.glue
    glue("first_ms", first_ms, display=False)

which glues ``first_ms`` as `myst_nb.glue` does and, beside it,
``first_ms_ref``: the reference GPU's value as text, so that prose can say
"{glue:text}`first_ms:.3f` ms here, {glue:text}`first_ms_ref` ms on the
H100". ``ref.data("sweep", size=sizes, ms=times)`` records the numbers
behind a figure, so that the next capture on a GPU stores them.
``ref.compare()`` shows every value the lesson glued, this run's and the
reference's, side by side.

Each reference value is in one of three states, shown wherever it appears:

* **current**: the code cell that glues it is the one that ran on the GPU;
* **stale**: that cell has changed since the GPU ran it (the value is
  shown, marked "stale");
* **not captured**: no GPU run has glued it yet.

A few glued values are not measurements (a size the lesson chose, a figure
quoted from a source); ``book/reference/exclusions.json`` lists them, each
with its reason, and they get no reference.

From ``book/``, ``python -m src.reference`` writes and checks references:

* ``capture``: run the lessons on this machine's GPU and store what they
  glued and drew (refused on the CPU device model unless ``--allow-model``);
* ``import NOTEBOOKS...``: the same from lessons already executed, such as
  those ``tools/gpu/run.sh`` leaves in ``.gpu/out/nb``;
* ``status``: per lesson, how many values are current, stale, not captured
  or excluded, and which;
* ``run-info``: this machine's device and software, today's date and
  the checkout's commit, as JSON (``tools/gpu/run.sh`` stores it beside
  the lessons it runs, as ``run.json``, for ``import`` to read).
"""
import argparse
import ast
import base64
import datetime
import hashlib
import html
import json
import math
import numbers
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

BOOK = Path(__file__).resolve().parents[1]
REFERENCE_DIR = BOOK / "reference"
DEFAULT_DEVICE = "nvidia-h100"
EXCLUSIONS = REFERENCE_DIR / "exclusions.json"
REF_SUFFIX = "_ref"
LESSON_GLOB = "[0-9][0-9]_*.ipynb"
GLUE_PREFIX = "application/papermill.record/"
RAISES = "raises-exception"
#: The type `Lesson.data` glues figure data as: JSON that notebooks may
#: store as JSON (their schema wants ``+json`` for that).
FIGURE_DATA = "application/vnd.book.figure-data+json"

CURRENT, STALE, NOT_CAPTURED, EXCLUDED = (
    "current", "stale", "not captured", "excluded")
STATES = (CURRENT, STALE, NOT_CAPTURED, EXCLUDED)


# -- reading notebooks and reference files ------------------------------------
def fingerprint(source):
    """A short hash of a cell's code, blind to blank lines and trailing
    spaces: two cells with the same code have the same fingerprint."""
    lines = [ln.rstrip() for ln in source.splitlines() if ln.strip()]
    return hashlib.sha1("\n".join(lines).encode()).hexdigest()[:12]


_NUMPY_SCALAR = re.compile(r"^np\.(?:float|int|uint|bool_?)\w*\((.*)\)$")


def parse_glued(text):
    """A glued value from its ``text/plain`` form: a number, string, list
    or dict where Python can read it back (NumPy's scalars too), else the
    text itself."""
    match = _NUMPY_SCALAR.match(text.strip())
    if match:
        text = match.group(1)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _text(value):
    return "".join(value) if isinstance(value, list) else value


def _mime(data, kind):
    """The ``kind`` entry of an output's data, glued or displayed."""
    for key in (GLUE_PREFIX + kind, kind):
        if key in data:
            return data[key]
    return None


def read_glued(nb):
    """Every value glued in the stored outputs of notebook ``nb`` (a dict,
    as json.load reads it), as ``{key: record}`` where a record holds the
    cell's ``index`` and ``source``, the ``value`` and its ``kind``:
    ``"value"``, or ``"data"`` for figure data glued by `Lesson.data`
    (as `FIGURE_DATA`)."""
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
            as_json = _mime(data, FIGURE_DATA)
            markdown = _mime(data, "text/markdown")
            plain = _mime(data, "text/plain")
            if as_json is not None:
                kind, value = "data", as_json
            elif markdown is not None:          # IPython's Markdown(...)
                kind, value = "value", _text(markdown)
            else:
                kind = "value"
                value = None if plain is None else parse_glued(_text(plain))
            found[name] = {"index": i, "source": source, "value": value,
                           "kind": kind}
    return found


def glued_outputs(nb):
    """``{key: (cell_index, cell_source, value)}`` for every value glued in
    the stored outputs of notebook ``nb``."""
    return {k: (r["index"], r["source"], r["value"])
            for k, r in read_glued(nb).items()}


def compared_keys(nb):
    """The keys listed in the stored output of ``Lesson.compare()``."""
    keys = set()
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            page = _text(out.get("data", {}).get("text/html", ""))
            if 'class="reference-compare"' in page:
                keys.update(html.unescape(k) for k in
                            re.findall(r'data-key="([^"]*)"', page))
    return keys


def reference_path(device=DEFAULT_DEVICE, root=None):
    return Path(root or REFERENCE_DIR) / f"{device}.json"


def load(device=DEFAULT_DEVICE, root=None):
    """The reference of ``device``; an empty one if none was captured."""
    path = reference_path(device, root)
    if not path.exists():
        return {"device": {"name": device}, "lessons": {}}
    return json.loads(path.read_text())


def load_exclusions(root=None):
    """``{lesson: {key: reason}}``: glued values that get no reference
    (the book's, in ``book/reference/``, unless ``root`` says where)."""
    path = Path(root or REFERENCE_DIR) / EXCLUSIONS.name
    if not path.exists():
        return {}
    return json.loads(path.read_text())


def lesson_names(book=None):
    """The lessons of the book, by notebook stem, in reading order."""
    return [p.stem for p in sorted(Path(book or BOOK).glob(LESSON_GLOB))]


def _read_lesson(lesson, book=None):
    path = Path(book or BOOK) / f"{lesson}.ipynb"
    return json.loads(path.read_text()) if path.exists() else None


def current_fingerprints(lesson, book=None):
    """``{key: fingerprint}`` of the cells that glue each key in the lesson
    as it is on disk now (``*_ref`` keys left out)."""
    nb = _read_lesson(lesson, book)
    if nb is None:
        return {}
    found = {k: fingerprint(r["source"]) for k, r in read_glued(nb).items()}
    # A key glued by a cell that has not run yet: find the cell by name.
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = _text(cell["source"])
            for key in _literal_keys(src):
                found.setdefault(key, fingerprint(src))
    return {k: v for k, v in found.items() if not k.endswith(REF_SUFFIX)}


def _literal_keys(source):
    """Names glued with a literal string in ``source`` (by ``glue(...)``,
    ``ref.glue(...)`` or ``ref.data(...)``)."""
    keys = []
    try:
        tree = ast.parse(source)
    except SyntaxError:                 # IPython magics: no keys to find
        return keys
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and \
                getattr(node.func, "attr", getattr(node.func, "id", "")) \
                in ("glue", "data") and \
                isinstance(node.args[0], ast.Constant) and \
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


def _entries(reference, lesson):
    """``{key: entry}`` of a lesson's reference: glued values and figure
    data alike (an entry has the ``cell`` fingerprint that glued it)."""
    part = reference.get("lessons", {}).get(lesson, {})
    return {**part.get("data", {}), **part.get("values", {})}


def lesson_status(lesson, device=DEFAULT_DEVICE, book=None, reference=None,
                  exclusions=None, root=None):
    """``{key: state}`` for every key the lesson glues now."""
    reference = load(device, root) if reference is None else reference
    exclusions = load_exclusions() if exclusions is None else exclusions
    excluded = exclusions.get(lesson, {})
    entries = _entries(reference, lesson)
    return {key: EXCLUDED if key in excluded else
            status_of(entries.get(key), now)
            for key, now in current_fingerprints(lesson, book).items()}


def report(device=DEFAULT_DEVICE, book=None, root=None):
    """``{lesson: {state: [keys]}}`` for every lesson of the book."""
    reference, exclusions = load(device, root), load_exclusions()
    out = {}
    for lesson in lesson_names(book):
        states = {s: [] for s in STATES}
        for key, state in lesson_status(lesson, device, book, reference,
                                        exclusions).items():
            states[state].append(key)
        out[lesson] = states
    return out


def unshown_keys(nb, lesson, reference=None, exclusions=None):
    """The keys notebook ``nb`` glues (``*_ref`` aside) that have no value
    in the reference, no exclusion, and are not shown as "not captured":
    neither glued through `Lesson.glue` (which glues ``*_ref`` beside),
    nor listed by ``Lesson.compare()``, nor figure data of `Lesson.data`.
    """
    reference = load() if reference is None else reference
    exclusions = load_exclusions() if exclusions is None else exclusions
    glued = read_glued(nb)
    known = set(_entries(reference, lesson)) | set(
        exclusions.get(lesson, {})) | compared_keys(nb)
    return sorted(k for k, rec in glued.items()
                  if not k.endswith(REF_SUFFIX) and k not in known
                  and k + REF_SUFFIX not in glued and rec["kind"] != "data")


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


# -- in a lesson --------------------------------------------------------------
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


class Text(str):
    """A string whose ``repr`` is the string itself, so that a glued
    sentence pastes as written (no quotes)."""

    def __repr__(self):
        return str(self)


class Lesson:
    """The reference run of one lesson, and this run's glued values."""

    def __init__(self, lesson, device=DEFAULT_DEVICE):
        self.lesson = lesson
        self.device = device
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
            "it has changed since).</p>")
    body = "".join(
        f'<tr data-key="{escape(k)}"><td><code>{escape(k)}</code></td>'
        f"<td>{escape(a)}</td><td>{escape(b)}</td>"
        f"<td>{escape(s)}</td></tr>"
        for k, a, b, s in rows)
    return (f'{head}<table class="reference-compare"><thead><tr>'
            f"<th>value</th><th>this run</th>"
            f"<th>{escape(device_name)}</th><th>reference</th></tr>"
            f"</thead><tbody>{body}</tbody></table>")


# -- this machine -------------------------------------------------------------
_DROP = re.compile(r"^(\d+gb|hbm\w*|pcie|sxm\d*|nvl|tensor|core|gpu)$")


def device_slug(name):
    """The file name of a device's reference, from its name: vendor and
    model, without memory size or form factor (``NVIDIA H100 80GB HBM3``:
    ``nvidia-h100``)."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    kept = [w for w in words if not _DROP.match(w)] or words
    return "-".join(kept) or "unknown"


def _cuda_version(v):
    return f"{v // 1000}.{v % 1000 // 10}"


def _nvidia_smi(index):
    """Driver version and PCIe link from nvidia-smi, where it runs."""
    fields = "driver_version,pcie.link.gen.max,pcie.link.width.max"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
             f"--id={index}"], capture_output=True, text=True, timeout=30,
            check=True).stdout.strip()
        driver, gen, width = [s.strip() for s in out.split(",")]
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    info = {"driver": driver}
    if gen.isdigit():
        info["link"] = f"PCIe {gen}.0" + (f" x{width}" if width.isdigit()
                                           else "")
    return info


def device_info(index=0):
    """This machine's device and software as a reference records them."""
    import numpy
    from . import BACKEND, cp
    info = {"backend": BACKEND, "python": platform.python_version(),
            "numpy": numpy.__version__,
            "host_cpus": len(os.sched_getaffinity(0))}
    if BACKEND != "gpu":
        info["name"] = "CPU device model"
        return info
    runtime = cp.cuda.runtime
    props = runtime.getDeviceProperties(index)
    name = props["name"]
    info.update(
        name=name.decode() if isinstance(name, bytes) else str(name),
        sms=props["multiProcessorCount"],
        l2_mib=props["l2CacheSize"] / 2**20,
        memory_gib=round(props["totalGlobalMem"] / 2**30, 1),
        compute_capability=f"{props['major']}.{props['minor']}",
        asyncEngineCount=props["asyncEngineCount"],
        concurrentKernels=props["concurrentKernels"],
        cuda_runtime=_cuda_version(runtime.runtimeGetVersion()),
        cuda_driver=_cuda_version(runtime.driverGetVersion()))
    try:
        from importlib.metadata import packages_distributions
        dists = packages_distributions().get("cupy", [])
        info["cupy"] = cp.__version__ + (f" ({dists[0]})" if dists else "")
    except Exception:                       # noqa: BLE001  (best effort)
        info["cupy"] = cp.__version__
    info.update(_nvidia_smi(index))
    return info


def git_commit(where=BOOK):
    """The short hash of the checkout, ``+dirty`` if tracked files
    changed; ``unknown`` outside git."""
    def git(*args):
        return subprocess.run(["git", "-C", str(where), *args],
                              capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()
    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def run_info():
    """What a reference records of a run here: the device and software,
    the date and the commit."""
    return {"device": device_info(), "date": today(),
            "commit": git_commit()}


def today():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


class RefusedError(RuntimeError):
    """A reference would not be a real GPU's, or a lesson failed."""


def refuse_model(backend, allow_model):
    """A reference is a real GPU's: refuse the CPU device model unless
    asked for it."""
    if backend != "gpu" and not allow_model:
        raise RefusedError(
            "this machine runs the CPU device model, not a GPU: a reference "
            "is a real GPU's numbers (pass --allow-model to write one "
            "anyway, for trying the tool)")


# -- writing a reference ------------------------------------------------------
def unexpected_errors(nb):
    """``[(cell index, error name)]`` of errors outside cells tagged
    ``raises-exception``."""
    return [(i, out.get("ename")) for i, cell in enumerate(nb["cells"])
            if cell["cell_type"] == "code" and RAISES not in
            cell.get("metadata", {}).get("tags", [])
            for out in cell.get("outputs", [])
            if out.get("output_type") == "error"]


def banner_info(nb):
    """What a lesson's banner printed: ``backend`` (``gpu`` or ``cpu``),
    ``cupy`` and the first device's ``name``, where it says."""
    info = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        text = "".join(_text(o.get("text", "")) for o in cell.get(
            "outputs", []) if o.get("output_type") == "stream")
        if "Backend:" not in text:
            continue
        gpu = re.search(r"Backend: GPU, CuPy (\S+)", text)
        info["backend"] = "gpu" if gpu else "cpu"
        if gpu:
            info["cupy"] = gpu.group(1)
        name = re.search(r"device 0: (.+?), [\d.]+ GiB", text)
        if name:
            info["name"] = name.group(1)
        break
    return info


def figures(nb):
    """``[(cell index, k, png bytes, caption, name, source)]`` of every
    PNG image in the notebook's outputs (k counts images within a cell)."""
    found = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        meta = cell.get("metadata", {}).get("mystnb", {}).get("figure", {})
        k = 0
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png is None:
                continue
            found.append((i, k, base64.b64decode(_text(png)),
                          meta.get("caption", ""), meta.get("name"),
                          _text(cell["source"])))
            k += 1
    return found


def lesson_reference(nb, lesson, slug, figure_dir=None):
    """A lesson's part of a reference from its executed notebook: every
    glued value and figure's data with the fingerprint of the cell that
    glued it, and its figures, written as PNG files into ``figure_dir``
    (``book/reference/<slug>/``) when given."""
    values, data = {}, {}
    for key, rec in read_glued(nb).items():
        if key.endswith(REF_SUFFIX):
            continue
        cell = fingerprint(rec["source"])
        if rec["kind"] == "data":
            data[key] = {"series": rec["value"], "cell": cell}
        else:
            values[key] = {"value": rec["value"], "cell": cell}
    shown = []
    if figure_dir is not None:
        figure_dir = Path(figure_dir)
        figure_dir.mkdir(parents=True, exist_ok=True)
        for old in figure_dir.glob(f"{lesson}-cell*.png"):
            old.unlink()
    for i, k, png, caption, name, source in figures(nb):
        file = f"{lesson}-cell{i:02d}" + (f"-{k}" if k else "") + ".png"
        if figure_dir is not None:
            (figure_dir / file).write_bytes(png)
        figure = {"file": f"{slug}/{file}", "caption": caption,
                  "cell": fingerprint(source)}
        if name:
            figure["name"] = name
        shown.append(figure)
    part = {"values": values, "figures": shown}
    if data:
        part["data"] = data
    return part


def build(notebooks, device_info, slug, date, commit, source,
          previous=None, figure_root=None):
    """A reference from executed lessons, ``{lesson: nb}``, merged into
    ``previous`` (the lessons not given keep their part, with their own
    date and commit)."""
    lessons = dict((previous or {}).get("lessons", {}))
    for lesson, nb in notebooks.items():
        part = lesson_reference(
            nb, lesson, slug,
            None if figure_root is None else Path(figure_root) / slug)
        part.update(date=date, commit=commit)
        lessons[lesson] = part
    return {"device": device_info, "date": date, "commit": commit,
            "source": source, "lessons": dict(sorted(lessons.items()))}


def from_notebooks(paths, device_info, date, commit, source):
    """A reference built from executed lessons (``*.ipynb`` with outputs),
    figures left out."""
    notebooks = {Path(p).stem: json.loads(Path(p).read_text())
                 for p in sorted(paths)}
    return build(notebooks, device_info, device_slug(
        device_info.get("name", "unknown")), date, commit, source)


def write(reference, device=DEFAULT_DEVICE, root=None):
    path = reference_path(device, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    return path


def _check_errors(notebooks, allow_errors):
    failed = {lesson: errs for lesson, nb in notebooks.items()
              if (errs := unexpected_errors(nb))}
    for lesson, errs in failed.items():
        print(f"{lesson}: unexpected errors in cells "
              + ", ".join(f"{i} ({e})" for i, e in errs), file=sys.stderr)
    if failed and not allow_errors:
        raise RefusedError("lessons failed; nothing written "
                           "(--allow-errors to write them anyway)")


def save(notebooks, info, slug, date, commit, source, root=None,
         replace=False):
    """Write the reference of ``slug`` under ``root``, its figures beside
    it; return the JSON's path."""
    root = Path(root or REFERENCE_DIR)
    path = Path(root) / f"{slug}.json"
    previous = None
    if path.exists() and not replace:
        previous = json.loads(path.read_text())
    if replace and (Path(root) / slug).is_dir():
        for old in (Path(root) / slug).glob("*.png"):
            old.unlink()
    reference = build(notebooks, info, slug, date, commit, source,
                      previous, root)
    return write(reference, slug, root)


def import_notebooks(paths, device=None, commit=None, date=None,
                     run_info_file=None, allow_model=False,
                     allow_errors=False, replace=False, root=None,
                     source=None):
    """The ``import`` command: a reference from executed lessons, with the
    device, date and commit of their run from ``run_info_file`` (as the
    ``run-info`` command writes it; default: ``run.json`` beside the
    notebooks or in their parent folder)."""
    paths = [Path(p) for p in paths]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise RefusedError(f"no such notebook: {', '.join(missing)}")
    notebooks = {p.stem: json.loads(p.read_text()) for p in sorted(paths)}
    banners = [banner_info(nb) for nb in notebooks.values()]
    if run_info_file is None:
        found = [d / "run.json" for d in (paths[0].parent,
                                          paths[0].parent.parent)
                 if (d / "run.json").is_file()]
        run_info_file = found[0] if found else None
    run = {}
    if run_info_file is not None:
        run = json.loads(Path(run_info_file).read_text())
        if "device" not in run:             # a device's properties alone
            run = {"device": run}
    info = dict(run.get("device", {}))
    for found in banners:
        for k in ("name", "cupy"):
            if found.get(k):
                info.setdefault(k, found[k])
    slug = device or (device_slug(info["name"]) if info.get("name")
                      else None)
    if slug is None:
        raise RefusedError("the notebooks do not say which device ran them: "
                           "pass --device SLUG")
    previous = reference_path(slug, root)
    if run_info_file is None and previous.exists():
        # Nothing says more about the device than the lessons' banner:
        # keep what the reference already records of it.
        old = json.loads(previous.read_text()).get("device", {})
        info = {**old, **info}
        print(f"no run.json beside the notebooks: the device's properties "
              f"are those {previous.name} recorded", file=sys.stderr)
    backends = {b.get("backend") for b in banners} - {None}
    refuse_model(info.get("backend") or ("cpu" if "cpu" in backends
                                         else "gpu"), allow_model)
    _check_errors(notebooks, allow_errors)
    source = source or "imported from " + ", ".join(sorted(
        {_shown_path(p.parent) for p in paths}))
    if not commit and run.get("commit") not in (None, "unknown"):
        commit = run["commit"]
    return save(notebooks, info, slug, date or run.get("date") or today(),
                commit or git_commit(), source, root, replace)


def _shown_path(path):
    path = Path(path).resolve()
    for base in (BOOK.parent, BOOK.parent.parent):
        try:
            return str(path.relative_to(base))
        except ValueError:
            continue
    return str(path)


def execute_notebook(nb, timeout=600):
    """Run notebook ``nb`` (an nbformat node, changed in place) top to
    bottom in a fresh kernel started in ``book/``, errors allowed (they
    are checked afterwards)."""
    from nbclient import NotebookClient
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   allow_errors=True,
                   resources={"metadata": {"path": str(BOOK)}}).execute()
    return nb


def execute(path, timeout=600):
    """Run one lesson in a fresh kernel; return the executed notebook as
    a dict."""
    import nbformat
    nb = execute_notebook(nbformat.read(str(path), as_version=4), timeout)
    return json.loads(nbformat.writes(nb))


def capture(lessons=None, device=None, allow_model=False, allow_errors=False,
            save_dir=None, timeout=600, root=None):
    """The ``capture`` command: run the lessons here and store them."""
    from . import BACKEND
    refuse_model(BACKEND, allow_model)
    # The device is read in a process of its own, so that this one holds
    # no GPU context while the lessons run.
    probe = subprocess.run(
        [sys.executable, "-m", "src.reference", "run-info"], cwd=BOOK,
        capture_output=True, text=True, timeout=300)
    if probe.returncode:
        raise RefusedError(f"run-info failed: {probe.stderr.strip()}")
    info = json.loads(probe.stdout)["device"]
    refuse_model(info.get("backend"), allow_model)
    slug = device or device_slug(info["name"])
    names = [Path(n).name.removesuffix(".ipynb") for n in lessons] \
        if lessons else lesson_names()
    unknown = [n for n in names if not (BOOK / f"{n}.ipynb").exists()]
    if unknown:
        raise RefusedError(f"no such lesson: {', '.join(unknown)}")
    commit, notebooks = git_commit(), {}
    for name in names:
        print(f"running {name} ...", flush=True)
        notebooks[name] = nb = execute(BOOK / f"{name}.ipynb", timeout)
        if save_dir is not None:
            Path(save_dir).mkdir(parents=True, exist_ok=True)
            (Path(save_dir) / f"{name}.ipynb").write_text(json.dumps(nb))
    _check_errors(notebooks, allow_errors)
    return save(notebooks, info, slug, today(), commit,
                f"captured by `python -m src.reference capture` on {slug}",
                root)


def print_status(device=DEFAULT_DEVICE, out=None, book=None, root=None):
    """The ``status`` command."""
    out = out or sys.stdout
    reference = load(device, root)
    info = reference.get("device", {})
    print(f"reference {device}: {info.get('name', '?')}, captured "
          f"{reference.get('date', 'never')}, commit "
          f"{reference.get('commit', '-')}", file=out)
    for lesson, states in report(device, book, root).items():
        counts = ", ".join(f"{len(states[s])} {s}" for s in STATES)
        print(f"{lesson:<18} {counts}", file=out)
        for state in (STALE, NOT_CAPTURED):
            if states[state]:
                print(f"  {state}: {', '.join(sorted(states[state]))}",
                      file=out)
        part = reference.get("lessons", {}).get(lesson, {})
        gone = sorted(set(_entries(reference, lesson))
                      - set(current_fingerprints(lesson, book)))
        if gone:
            print(f"  in the reference, no longer glued: {', '.join(gone)}",
                  file=out)
        figs = part.get("figures", [])
        if figs:
            now = {fingerprint(_text(c["source"])) for c in
                   (_read_lesson(lesson, book) or {"cells": []})["cells"]
                   if c["cell_type"] == "code"}
            stale = [f["file"] for f in figs if f.get("cell") not in now]
            print(f"  figures: {len(figs) - len(stale)} current, "
                  f"{len(stale)} stale", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m src.reference",
        description="Write and check the book's reference runs "
                    "(book/reference/<device>.json). Run from book/.")
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="run the lessons on this GPU and "
                         "store what they glued and drew")
    cap.add_argument("--device", help="slug of the reference file "
                     "(default: from the device's name, e.g. nvidia-h200)")
    cap.add_argument("--lessons", nargs="+", metavar="LESSON",
                     help="only these lessons (e.g. 05_streams); the "
                     "others keep their part of the reference")
    cap.add_argument("--allow-model", action="store_true",
                     help="capture on the CPU device model (for trying the "
                     "tool; a reference is a real GPU's)")
    cap.add_argument("--allow-errors", action="store_true",
                     help="store lessons with unexpected errors")
    cap.add_argument("--save", metavar="DIR",
                     help="also write the executed notebooks into DIR")
    cap.add_argument("--timeout", type=int, default=600,
                     help="seconds a cell may run (default 600)")
    imp = sub.add_parser("import", help="store lessons executed elsewhere "
                         "(e.g. ../.gpu/out/nb/*.ipynb)")
    imp.add_argument("notebooks", nargs="+", metavar="NOTEBOOK")
    imp.add_argument("--device", help="slug of the reference file (default: "
                     "from the device's name in run.json or the lessons' "
                     "banner)")
    imp.add_argument("--commit", help="commit the lessons ran from "
                     "(default: run.json's, else this checkout's)")
    imp.add_argument("--date", help="date of the run (default: run.json's, "
                     "else today)")
    imp.add_argument("--run-info", metavar="JSON",
                     help="the run's device, date and commit, as `run-info` "
                     "writes them (default: run.json beside the "
                     "notebooks, if any)")
    imp.add_argument("--source", help="where the notebooks come from, as "
                     "the reference records it (default: their folder)")
    imp.add_argument("--allow-model", action="store_true",
                     help="import lessons run on the CPU device model")
    imp.add_argument("--allow-errors", action="store_true",
                     help="import lessons with unexpected errors")
    imp.add_argument("--replace", action="store_true",
                     help="drop the lessons not given from the reference")
    st = sub.add_parser("status", help="per lesson: current, stale, not "
                        "captured and excluded values")
    st.add_argument("--device", default=DEFAULT_DEVICE)
    sub.add_parser("run-info", help="this machine's device and software, "
                   "the date and the commit, as JSON")
    args = parser.parse_args(argv)
    try:
        if args.command == "capture":
            path = capture(args.lessons, args.device, args.allow_model,
                           args.allow_errors, args.save, args.timeout)
        elif args.command == "import":
            path = import_notebooks(
                args.notebooks, args.device, args.commit, args.date,
                args.run_info, args.allow_model, args.allow_errors,
                args.replace, source=args.source)
        elif args.command == "status":
            try:
                print_status(args.device)
            except BrokenPipeError:     # `... status | head`
                sys.stderr.close()
            return 0
        else:
            print(json.dumps(run_info(), indent=1, sort_keys=True))
            return 0
    except RefusedError as e:
        print(f"refused: {e}", file=sys.stderr)
        return 2
    print(f"wrote {_shown_path(path)}")
    print_status(Path(path).stem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
