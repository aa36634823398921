"""A real GPU's numbers beside this run's: the book's reference runs.

``book/reference/<device>.json`` holds what each lesson glued when it ran on
a real GPU, with the device, the software
versions, the date and the commit of that run, the data behind the figures
where it was captured, and the figures themselves as PNG files in
``book/reference/<device>/``. A lesson opens a `Lesson` and glues through
it::

    ref = Lesson("01_1_runtime")
    glue = ref.glue
    glue("first_ms", first_ms, display=False)

which glues ``first_ms`` as `myst_nb.glue` does and, beside it,
``first_ms_ref``: the reference GPU's value as text. ``ref.glue_device()``
glues the reference GPU's name (``ref_gpu``, "NVIDIA H100"; ``ref_gpu_short``,
"H100"), so that prose can say
``{glue:text}`first_ms:.3f` ms here, {glue:text}`first_ms_ref` ms on the
{glue:text}`ref_gpu_short``` and stays true whichever GPU's run is the
reference; a sentence's reference clause goes through
``ref.glue_clause(NAME_ref, template)``, which glues it empty where a
value it quotes was not captured. ``ref.glue_profile()`` does the
same for the CPU device model's profile (``profile_gpu``, "H100";
``profile_device``; the costs prose quotes), so that
``its {glue:text}`profile_gpu` profile`` follows ``BOOK_CPU_PROFILE``. Words
about the reference's outcome ("on the H100 the two clocks are close") are
computed from its values, ``ref.reference("add_cpu_us")``, and glued with
``ref.glue_ref("clocks_words_ref", words)``; the tests fail on a lesson
that names the H100 by hand other than in a fact about H100s.
``ref.data("sweep", size=sizes, ms=times)`` records the numbers
behind a figure, so that the next capture on a GPU stores them.
``ref.compare()`` shows every number the lesson glued, this run's and the
reference's, side by side, in a collapsed table.

The book's reference devices are data: ``book/reference/devices`` lists
their slugs in order (``nvidia-h100``, and the H200 first once it has a
capture), `reference_devices` reads it, and ``python -m src.reference
default SLUG`` puts ``SLUG`` first (refused when no
``book/reference/SLUG.json`` exists; the book build's execution cache is
cleared, as after a capture). Each value a lesson shows comes from the
first device whose run of it is current, else from the first whose run of
it is stale, else it is not captured (`resolve`). ``ref_gpu`` names the
device that supplies most of a lesson's values; a value from another
device carries that device's name wherever it is shown ("0.97 (H100)"),
and a clause names the device behind its own values. What prose says of
a GPU that no run measures (its published memory bandwidth, memory size,
host link) comes from ``book/reference/device-facts.json`` by slug,
through a clause (``{ref_gpu_tbps}``), so that a fact is always the
device's whose values stand beside it. The CPU device model is compared
with the device its profile was measured on (`comparator_device`, the
H100), whatever the order.

Each glued value is in one of four states:

* **current**: the code cell that glues it is the one that ran on the GPU;
* **stale**: that cell has changed since the GPU ran it, or the entry is
  marked stale with its reason, because code the cell calls has changed
  what it measures (the value is shown with `STALE_MARK`, which
  ``ref.compare()`` explains once a page);
* **not captured**: no GPU run has glued it yet (a table shows `MISSING`,
  a dash; a sentence drops the clause);
* **excluded**: not a measurement (a size the lesson chose, a figure
  quoted from a source); ``book/reference/exclusions.json`` lists each
  with its reason, and it gets no reference.

From ``book/``, ``python -m src.reference`` writes and checks references:

* ``capture``: run the lessons on this machine's GPU and store what they
  glued and drew (refused on the CPU device model unless ``--allow-model``);
* ``import NOTEBOOKS...``: the same from lessons already executed, such as
  those ``tools/gpu/run.sh`` leaves in ``.gpu/out/nb``;
* ``status``: the reference devices in order, and per lesson (the misuse
  catalogue too) how many values are current, stale, not captured or
  excluded as the lessons show them, how many each device supplies, and
  which are stale or not captured (``--device SLUG``: that reference
  alone);
* ``mark-stale LESSON NAME... --why TEXT``: mark glued values or figures
  (by name) of a reference stale, with the reason: code in ``book/src``
  that their cell calls has changed what they measure, which the cell's
  own fingerprint cannot see (a new capture drops the marks);
* ``move LESSON NEW... [--rest NEW]``: when a lesson is split into
  sections (or renamed), give its part of every reference (values, figure
  data, figures and their PNG files) and its exclusions to the new
  lessons, each key to the one that glues it now, so that no captured
  value is lost (``status`` reports the same counts before and after);
* ``default [SLUG]``: make ``SLUG`` the first of the book's reference
  devices, the others after it (without it: print the first);
* ``run-info``: this machine's device and software, today's date and
  the checkout's commit, as JSON (``tools/gpu/run.sh`` stores it beside
  the lessons it runs, as ``run.json``, for ``import`` to read).

Import every name from ``src.reference`` itself. The code lives in its
modules ``store`` (the reference files, the lessons' glued values, the states; it
holds `BOOK` and `REFERENCE_DIR`, which the other modules read from it when
they run), ``lesson`` (`Lesson` and what it shows), ``machine`` (this
machine's device, software, date and commit), ``writer`` (``capture`` and
``import``) and ``cli`` (the commands).
"""
from .store import (
    CURRENT, DEFAULT_DEVICE, DEFAULT_FILE, DEVICE_KEYS, EXCLUDED,
    EXCLUSIONS, FACT_KEYS, FACTS, OTHER_LESSONS, PROFILE_KEYS,
    UNMEASURED_KEYS, FALLBACK_DEVICE, FIGURE_DATA, GLUE_PREFIX,
    LESSON_GLOB, NOT_CAPTURED, RAISES, REF_SUFFIX, STALE, STATES,
    compared_keys, current_fingerprints, default_device, fingerprint,
    glued_outputs, lesson_names, lesson_status, load, load_exclusions,
    load_labels, parse_glued, read_glued, reference_devices,
    reference_lessons, reference_path, report, resolve, sources, status_of,
    unshown_keys)
from .cells import model_blind
from .devices import (
    clear_execution_cache, comparator_device, device_facts,
    set_default_device, set_reference_devices)
from .lesson import FigureData, Lesson, Text, short_name
from .table import (
    MISSING, STALE_MARK, capture_words, compare_table, format_value,
    is_number, key_label, notebook_labels, table_labels)
from .machine import (
    RefusedError, device_info, device_slug, git_commit, refuse_model,
    run_info, today)
from .writer import (
    banner_info, build, capture, execute, execute_notebook, figures,
    from_notebooks, import_notebooks, lesson_reference, move_lesson,
    save, unexpected_errors, write)
from .cli import main, print_sources, print_status

__all__ = [
    # reading the reference and the lessons (src.reference.store)
    "CURRENT", "STALE", "NOT_CAPTURED", "EXCLUDED", "STATES",
    "DEFAULT_DEVICE", "DEFAULT_FILE", "FALLBACK_DEVICE", "DEVICE_KEYS",
    "PROFILE_KEYS", "UNMEASURED_KEYS", "FACT_KEYS", "FACTS",
    "OTHER_LESSONS", "reference_devices", "set_reference_devices",
    "reference_lessons", "resolve", "sources", "device_facts",
    "comparator_device", "clear_execution_cache",
    "EXCLUSIONS", "REF_SUFFIX", "LESSON_GLOB", "GLUE_PREFIX", "RAISES",
    "FIGURE_DATA", "default_device", "set_default_device",
    "fingerprint", "model_blind", "parse_glued", "read_glued", "glued_outputs",
    "compared_keys", "reference_path", "load", "load_exclusions",
    "load_labels",
    "lesson_names", "current_fingerprints", "status_of", "lesson_status",
    "report", "unshown_keys",
    # in a lesson (src.reference.lesson)
    "format_value", "FigureData", "Text", "Lesson", "compare_table",
    "short_name", "STALE_MARK", "MISSING", "capture_words", "key_label",
    "table_labels", "notebook_labels", "is_number",
    # this machine (src.reference.machine)
    "device_slug", "device_info", "git_commit", "run_info", "today",
    "RefusedError", "refuse_model",
    # writing a reference (src.reference.writer)
    "unexpected_errors", "banner_info", "figures", "lesson_reference",
    "build", "from_notebooks", "write", "save", "import_notebooks",
    "execute_notebook", "execute", "capture", "move_lesson",
    # the command line (src.reference.cli)
    "print_status", "print_sources", "main",
]
