"""The reference files and the lessons' glued values, and each value's state.

Where the book and its references are (`BOOK`, `REFERENCE_DIR`: the rest
of the package reads them from here when it runs, so a test points them
elsewhere here), which device is the book's reference (`default_device`,
from ``book/reference/devices``), how a notebook's glued values are
read back, and whether a reference value is current, stale, not captured
or excluded.
"""
import ast
import hashlib
import html
import json
import re
from pathlib import Path

from .cells import model_blind

BOOK = Path(__file__).resolve().parents[2]
REFERENCE_DIR = BOOK / "reference"
#: The file that lists the book's reference devices in order, one slug a
#: line: a lesson shows each value from the first of them whose run of
#: that value is current (`resolve`). The first is the book's default
#: device. `FALLBACK_DEVICE` is read when the file is absent.
DEFAULT_FILE = "devices"
FALLBACK_DEVICE = "nvidia-h100"
#: ``{slug: facts}``: what the prose says of a reference GPU that its run
#: does not measure (published memory bandwidth, memory size, host link),
#: with their source (`device_facts`).
FACTS = REFERENCE_DIR / "device-facts.json"
EXCLUSIONS = REFERENCE_DIR / "exclusions.json"
#: ``{lesson: {key: label}}``: the words a comparison table gives a value
#: that no table of its lesson labels (`Lesson.labels`).
LABELS = REFERENCE_DIR / "labels.json"
REF_SUFFIX = "_ref"
#: Keys `Lesson.glue_device` glues: the reference device's name for prose,
#: not a measurement (they get no ``*_ref`` and no reference value).
DEVICE_KEYS = ("ref_gpu", "ref_gpu_short")
#: Names a reference clause (`Lesson.clause`) may use for the published
#: facts of the device behind its values, and the `device_facts` field
#: each reads: ``"at its published {ref_gpu_tbps} TB/s"``.
FACT_KEYS = {"ref_gpu_tbps": "bandwidth_tbps", "ref_gpu_memory_gb":
             "memory_gb", "ref_gpu_link": "link"}
#: Keys `Lesson.glue_profile` glues: the CPU device model's profile (its
#: GPU's name and the costs prose quotes), configuration, not measurements.
PROFILE_KEYS = ("profile_gpu", "profile_device", "profile_context_ms",
                "profile_stage_gbps", "profile_h2d_gbps")
#: Glued keys that are no measurement of the run: never captured, no
#: ``*_ref``, no reference value needed.
UNMEASURED_KEYS = DEVICE_KEYS + PROFILE_KEYS
LESSON_GLOB = "[0-9][0-9]_*.ipynb"
GLUE_PREFIX = "application/papermill.record/"
RAISES = "raises-exception"
#: The type `Lesson.data` glues figure data as: JSON that notebooks may
#: store as JSON (their schema wants ``+json`` for that).
FIGURE_DATA = "application/vnd.book.figure-data+json"

CURRENT, STALE, NOT_CAPTURED, EXCLUDED = (
    "current", "stale", "not captured", "excluded")
STATES = (CURRENT, STALE, NOT_CAPTURED, EXCLUDED)


def reference_devices(root=None):
    """The book's reference devices, in order (slugs): the lines of
    ``devices`` in ``root`` (`REFERENCE_DIR`), else `FALLBACK_DEVICE`
    alone. A value comes from the first of them whose entry is current,
    else the first whose entry is stale (`resolve`)."""
    path = Path(root or REFERENCE_DIR) / DEFAULT_FILE
    slugs = []
    if path.exists():
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line and line not in slugs:
                slugs.append(line)
    return slugs or [FALLBACK_DEVICE]


def default_device(root=None):
    """The slug of the book's default reference device: the first of
    `reference_devices`, the one whose name the lessons' prose gives
    where a lesson's values come from it."""
    return reference_devices(root)[0]


#: The default reference device when this module was imported
#: (`default_device` reads it again, as a test that moves `REFERENCE_DIR`
#: needs).
DEFAULT_DEVICE = default_device()


def fingerprint(source):
    """A short hash of a cell's code, blind to blank lines and trailing
    spaces, and to what only the CPU device model runs: the ``cpu`` size
    of ``pick(cpu=..., gpu=...)`` (`model_blind`). Two cells that run the
    same code on a GPU have the same fingerprint, so a change of the
    model's size leaves a GPU's values current; a change of the ``gpu``
    size, or of any other code, does not."""
    source = model_blind(source)
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


def reference_path(device=None, root=None):
    """The reference file of ``device`` (default: `default_device`)."""
    device = device or default_device(root)
    return Path(root or REFERENCE_DIR) / f"{device}.json"


def load(device=None, root=None):
    """The reference of ``device`` (default: `default_device`); an empty
    one if none was captured."""
    device = device or default_device(root)
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


def load_labels(root=None):
    """``{lesson: {key: label}}`` from ``labels.json`` (the book's, in
    ``book/reference/``, unless ``root`` says where)."""
    path = Path(root or REFERENCE_DIR) / LABELS.name
    if not path.exists():
        return {}
    return {k: v for k, v in json.loads(path.read_text()).items()
            if not k.startswith("_")}


def lesson_names(book=None):
    """The lessons of the book, by notebook stem, in reading order."""
    return [p.stem for p in sorted(Path(book or BOOK).glob(LESSON_GLOB))]


#: Notebooks outside `LESSON_GLOB` that glue values through `Lesson` and
#: so have a part in each reference (the misuse catalogue).
OTHER_LESSONS = ("misuse",)


def reference_lessons(book=None):
    """Every notebook with a part in the references: the lessons
    (`lesson_names`), then `OTHER_LESSONS` that exist."""
    return lesson_names(book) + [
        n for n in OTHER_LESSONS if (Path(book or BOOK) / f"{n}.ipynb")
        .exists()]


def _read_lesson(lesson, book=None):
    path = Path(book or BOOK) / f"{lesson}.ipynb"
    return json.loads(path.read_text()) if path.exists() else None


def current_fingerprints(lesson, book=None, entries=None):
    """``{key: fingerprint}`` of the cells that glue each key in the lesson
    as it is on disk now (``*_ref`` keys left out). With ``entries`` (the
    reference's), a key that neither this run nor a literal name shows (an
    f-string key in a branch only a GPU takes) has the fingerprint of the
    cell that glued it on the GPU, while that cell is there unchanged."""
    return _with_entries(_lesson_cells(lesson, book), entries)


def _lesson_cells(lesson, book=None):
    """``(found, cells)``: ``{key: fingerprint}`` of the keys the stored
    lesson glues or names literally, and the fingerprints of all its
    code cells (empty when there is no such lesson)."""
    nb = _read_lesson(lesson, book)
    if nb is None:
        return {}, set()
    found = {k: fingerprint(r["source"]) for k, r in read_glued(nb).items()}
    # A key glued by a cell that has not run yet: find the cell by name.
    cells = set()
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = _text(cell["source"])
            cells.add(fingerprint(src))
            for key in _literal_keys(src):
                found.setdefault(key, fingerprint(src))
    return found, cells


def _with_entries(lesson_cells, entries):
    found, cells = lesson_cells
    found = dict(found)
    for key, entry in (entries or {}).items():
        if key not in found and entry.get("cell") in cells:
            found[key] = entry["cell"]
    return {k: v for k, v in found.items()
            if not k.endswith(REF_SUFFIX) and k not in UNMEASURED_KEYS}


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
    the cell that glues it now (or None): stale when that cell changed, or
    when the entry is marked ``"stale"`` (with the reason: see
    `writer.mark_stale`)."""
    if entry is None:
        return NOT_CAPTURED
    if now is not None and entry.get("cell") == now \
            and not entry.get("stale"):
        return CURRENT
    return STALE


def figure_stale(figure, now):
    """Whether a reference ``figure`` is stale, given the fingerprints of
    the lesson's code cells now."""
    return figure.get("cell") not in now or bool(figure.get("stale"))


def _entries(reference, lesson):
    """``{key: entry}`` of a lesson's reference: glued values and figure
    data alike (an entry has the ``cell`` fingerprint that glued it)."""
    part = reference.get("lessons", {}).get(lesson, {})
    return {**part.get("data", {}), **part.get("values", {})}


def lesson_status(lesson, device=None, book=None, reference=None,
                  exclusions=None, root=None):
    """``{key: state}`` for every key the lesson glues now."""
    reference = load(device, root) if reference is None else reference
    exclusions = load_exclusions() if exclusions is None else exclusions
    excluded = exclusions.get(lesson, {})
    entries = _entries(reference, lesson)
    return {key: EXCLUDED if key in excluded else
            status_of(entries.get(key), now)
            for key, now in current_fingerprints(lesson, book,
                                                 entries).items()}


def resolve(lesson, devices=None, book=None, references=None,
            exclusions=None, root=None):
    """``{key: (state, slug)}`` for every key the lesson glues now, over
    the reference devices ``devices`` (default: `reference_devices`) in
    order: a value comes from the first device whose entry of it is
    current; else from the first whose entry is stale; else it is not
    captured (slug None), or excluded (slug None). ``references``:
    ``{slug: reference}`` already loaded."""
    devices = list(devices or reference_devices(root))
    references = references or {}
    exclusions = load_exclusions() if exclusions is None else exclusions
    excluded = exclusions.get(lesson, {})
    cells = _lesson_cells(lesson, book)
    per = []
    for slug in devices:
        reference = references.get(slug)
        if reference is None:
            reference = references[slug] = load(slug, root)
        entries = _entries(reference, lesson)
        per.append((slug, entries, _with_entries(cells, entries)))
    keys = {}
    for _, _, now in per:
        for key in now:
            keys.setdefault(key, None)
    out = {}
    for key in keys:
        if key in excluded:
            out[key] = (EXCLUDED, None)
            continue
        states = [(slug, status_of(entries.get(key), now.get(key)))
                  for slug, entries, now in per]
        out[key] = next(
            ((CURRENT, slug) for slug, st in states if st == CURRENT),
            next(((STALE, slug) for slug, st in states if st == STALE),
                 (NOT_CAPTURED, None)))
    return out


def report(device=None, book=None, root=None):
    """``{lesson: {state: [keys]}}`` for every notebook with a part in the
    references (`reference_lessons`, the misuse catalogue too): with
    ``device``, that reference alone; without, each value as the lessons
    show it, from the reference devices in order (`resolve`)."""
    if device is not None:
        reference, exclusions = load(device, root), load_exclusions()
    else:
        references, exclusions = {}, load_exclusions()
    out = {}
    for lesson in reference_lessons(book):
        states = {s: [] for s in STATES}
        if device is not None:
            found = lesson_status(lesson, device, book, reference,
                                  exclusions)
        else:
            found = {k: st for k, (st, _) in resolve(
                lesson, None, book, references, exclusions, root).items()}
        for key, state in found.items():
            states[state].append(key)
        out[lesson] = states
    return out


def sources(book=None, root=None):
    """``{lesson: {key: (state, slug)}}``: `resolve` for every notebook
    with a part in the references."""
    references, exclusions = {}, load_exclusions()
    return {lesson: resolve(lesson, None, book, references, exclusions, root)
            for lesson in reference_lessons(book)}


def unshown_keys(nb, lesson, reference=None, exclusions=None):
    """The keys notebook ``nb`` glues (``*_ref`` and `UNMEASURED_KEYS`
    aside: the reference device's and the model profile's names) that
    have no value in the reference, no exclusion, and are not shown as
    "not captured":
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
                  and k not in UNMEASURED_KEYS
                  and k + REF_SUFFIX not in glued and rec["kind"] != "data")

