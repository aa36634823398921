"""Writing a reference: the ``capture`` and ``import`` commands.

A lesson's part of a reference comes from its executed notebook (glued
values, figure data, figures) and is merged into the reference file. The
book's and the references' folders are read from `src.reference.store`
when a command runs.
"""
import base64
import json
import re
import subprocess
import sys
from pathlib import Path

from . import store
from .devices import clear_execution_cache
from .machine import (
    RefusedError, device_slug, git_commit, refuse_model, today)
from .store import (
    RAISES, REF_SUFFIX, UNMEASURED_KEYS, _text, fingerprint, lesson_names,
    read_glued, reference_path)


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
        if key.endswith(REF_SUFFIX) or key in UNMEASURED_KEYS:
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
    date, commit and device: each part records the device that ran it, so
    that a later import cannot relabel it; the file's top-level device is
    the latest run's)."""
    lessons = dict((previous or {}).get("lessons", {}))
    for lesson, nb in notebooks.items():
        part = lesson_reference(
            nb, lesson, slug,
            None if figure_root is None else Path(figure_root) / slug)
        part.update(date=date, commit=commit, device=dict(device_info))
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


def write(reference, device=None, root=None):
    path = reference_path(device, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    return path


def mark_stale(lesson, names, why, device=None, root=None):
    """Mark the glued values or figures ``names`` of ``lesson`` in the
    reference of ``device`` stale, for the reason ``why``: code that their
    cell calls (in ``book/src``) has changed what they measure since the
    GPU ran it, which the cell's fingerprint cannot see. A new capture or
    import of the lesson writes fresh entries, without the mark. Returns
    the reference's path; ValueError for a name the lesson's reference
    lacks, or no reason."""
    if not why or not why.strip():
        raise ValueError("say why the values are stale (--why)")
    reference = store.load(device, root)
    part = reference.get("lessons", {}).get(lesson)
    if part is None:
        raise ValueError(f"the reference has no lesson {lesson!r}")
    entries = {**part.get("data", {}), **part.get("values", {})}
    figures = {f.get("name"): f for f in part.get("figures", [])}
    unknown = [n for n in names if n not in entries and n not in figures]
    if unknown:
        raise ValueError(f"{lesson}'s reference has no value or figure "
                         f"{', '.join(unknown)}")
    for name in names:
        (entries.get(name) or figures[name])["stale"] = why.strip()
    return write(reference, device, root)


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
    root = Path(root or store.REFERENCE_DIR)
    path = Path(root) / f"{slug}.json"
    previous = None
    if path.exists() and not replace:
        previous = json.loads(path.read_text())
    if replace and (Path(root) / slug).is_dir():
        for old in (Path(root) / slug).glob("*.png"):
            old.unlink()
    reference = build(notebooks, info, slug, date, commit, source,
                      previous, root)
    path = write(reference, slug, root)
    # The build's execution cache keys a lesson on its code alone: it
    # would serve the values glued from the reference before this one.
    clear_execution_cache(root)
    return path


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
    for base in (store.BOOK.parent, store.BOOK.parent.parent):
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
                   resources={"metadata": {"path": str(store.BOOK)}}).execute()
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
    from .. import BACKEND
    refuse_model(BACKEND, allow_model)
    # The device is read in a process of its own, so that this one holds
    # no GPU context while the lessons run.
    probe = subprocess.run(
        [sys.executable, "-m", "src.reference", "run-info"], cwd=store.BOOK,
        capture_output=True, text=True, timeout=300)
    if probe.returncode:
        raise RefusedError(f"run-info failed: {probe.stderr.strip()}")
    info = json.loads(probe.stdout)["device"]
    refuse_model(info.get("backend"), allow_model)
    slug = device or device_slug(info["name"])
    names = [Path(n).name.removesuffix(".ipynb") for n in lessons] \
        if lessons else lesson_names()
    unknown = [n for n in names if not (store.BOOK / f"{n}.ipynb").exists()]
    if unknown:
        raise RefusedError(f"no such lesson: {', '.join(unknown)}")
    commit, notebooks = git_commit(), {}
    for name in names:
        print(f"running {name} ...", flush=True)
        notebooks[name] = nb = execute(store.BOOK / f"{name}.ipynb", timeout)
        if save_dir is not None:
            Path(save_dir).mkdir(parents=True, exist_ok=True)
            (Path(save_dir) / f"{name}.ipynb").write_text(json.dumps(nb))
    _check_errors(notebooks, allow_errors)
    return save(notebooks, info, slug, today(), commit,
                f"captured by `python -m src.reference capture` on {slug}",
                root)



def _lesson_cells(lesson, book=None):
    """``{fingerprint: index}`` and ``{figure name: index}`` of the code
    cells of ``lesson`` as it is on disk now."""
    nb = store._read_lesson(lesson, book) or {"cells": []}
    prints, names = {}, {}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        prints.setdefault(fingerprint(_text(cell["source"])), i)
        name = cell.get("metadata", {}).get("mystnb", {}).get(
            "figure", {}).get("name")
        if name:
            names.setdefault(name, i)
    return prints, names


def _figure_file(figure, lesson, index, taken):
    """The new file name of ``figure`` moved into ``lesson`` whose cell is
    ``index`` there (None: keep the old cell number), unused in
    ``taken``."""
    slug, old = figure["file"].split("/", 1)
    match = re.match(r".*-cell(\d+)(-\d+)?\.png$", old)
    number = f"{index:02d}" if index is not None else match.group(1)
    base = f"{lesson}-cell{number}{match.group(2) or ''}"
    file, n = f"{slug}/{base}.png", 1
    while file in taken:
        file, n = f"{slug}/{base}-moved{n}.png", n + 1
    taken.add(file)
    return file


def move_lesson(lesson, into, rest=None, root=None, book=None):
    """The ``move`` command: give every part of ``lesson`` in the book's
    references (each ``<device>.json`` under ``root``, `REFERENCE_DIR`,
    with its figures' PNG files) and in its exclusions to the lessons
    ``into``, when a lesson is split into sections (or renamed: one
    lesson in ``into``). A glued value, figure data or exclusion goes to
    the lesson of ``into`` that glues its key now; a figure to the one
    whose code cell has its fingerprint, else its name; what none holds
    (no longer glued, or drawn by a cell since removed) goes to ``rest``
    (default: the first of ``into``). Each gets the capture's date and
    commit. Refused (ValueError) when a lesson of ``into`` is not in the
    book, already has a part of a reference, or is ``lesson`` itself.
    Returns the files written."""
    into = list(into)
    rest = rest or into[0]
    root = Path(root or store.REFERENCE_DIR)
    names = lesson_names(book)
    unknown = [t for t in into if t not in names]
    if not into or unknown or lesson in into or rest not in into:
        raise ValueError(
            f"move {lesson} into lessons of the book other than itself "
            f"(unknown: {', '.join(unknown) or '-'}; rest: {rest})")
    glued = {t: set(store.current_fingerprints(t, book)) for t in into}
    cells = {t: _lesson_cells(t, book) for t in into}

    def owner(key):
        return next((t for t in into if key in glued[t]), rest)

    def figure_owner(figure):
        for t in into:
            if figure.get("cell") in cells[t][0]:
                return t, cells[t][0][figure["cell"]]
        for t in into:
            if figure.get("name") in cells[t][1]:
                return t, cells[t][1][figure["name"]]
        return rest, None

    written = []
    for path in sorted(root.glob("*.json")):
        if path.name == store.EXCLUSIONS.name:
            continue
        reference = json.loads(path.read_text())
        lessons = reference.get("lessons", {})
        part = lessons.get(lesson)
        if part is None:
            continue
        taken = [t for t in into if t in lessons]
        if taken:
            raise ValueError(f"{path.name} already has {', '.join(taken)}")
        meta = {k: v for k, v in part.items()
                if k not in ("values", "data", "figures")}
        parts = {t: dict(meta) for t in into}
        for kind in ("values", "data"):
            for key, entry in part.get(kind, {}).items():
                parts[owner(key)].setdefault(kind, {})[key] = entry
        files = set()
        for figure in part.get("figures", []):
            target, index = figure_owner(figure)
            moved = dict(figure, file=_figure_file(figure, target, index,
                                                   files))
            if (root / figure["file"]).is_file():
                (root / figure["file"]).rename(root / (moved["file"]
                                                       + ".moving"))
            parts[target].setdefault("figures", []).append(moved)
        for moving in sorted(root.glob("*/*.png.moving")):
            moving.rename(moving.with_suffix(""))
        del lessons[lesson]
        for t in into:
            if len(parts[t]) > len(meta):       # something moved there
                parts[t].setdefault("values", {})
                parts[t].setdefault("figures", [])
                lessons[t] = parts[t]
        written.append(write(reference, path.stem, root))
    exclusions_path = root / store.EXCLUSIONS.name
    exclusions = store.load_exclusions(root)
    if lesson in exclusions:
        moved = {}                          # in place of the lesson's
        for name, keys in exclusions.items():
            if name != lesson:
                moved.setdefault(name, {}).update(keys)
                continue
            for key, why in keys.items():
                moved.setdefault(owner(key), {})[key] = why
        exclusions_path.write_text(json.dumps(moved, indent=1) + "\n")
        written.append(exclusions_path)
    return written
