"""Every number a lesson's comparison table shows (`Lesson.compare`) has
words a reader understands: the label the lesson's own table gives it, or
one in book/reference/labels.json, never words made from its key."""
import json
import re
from pathlib import Path

import pytest

from src import reference as R

BOOK = Path(__file__).resolve().parents[1] / "book"
PAGES = sorted(p for p in BOOK.glob("*.ipynb")
               if "ref.compare()" in p.read_text())
LABELS = R.load_labels()


def compared_numbers(nb, lesson):
    """The keys whose rows the table shows: glued by `Lesson.glue` (so with
    a ``*_ref`` beside them), not excluded, with a number for a value."""
    glued = R.read_glued(nb)
    excluded = R.load_exclusions().get(lesson, {})
    return [k for k, record in glued.items()
            if k + R.REF_SUFFIX in glued and k not in excluded
            and record["kind"] == "value"
            and R.is_number(R.format_value(record["value"]))]


def test_some_pages_compare():
    assert len(PAGES) >= 17, [p.name for p in PAGES]   # every lesson


@pytest.mark.parametrize("path", PAGES, ids=[p.stem for p in PAGES])
def test_every_compared_number_has_a_label(path):
    nb = json.loads(path.read_text())
    lesson = path.stem
    keys = compared_numbers(nb, lesson)
    assert keys, "no compared numbers found: is the lesson executed?"
    words = R.notebook_labels(nb)
    listed = LABELS.get(lesson, {})
    missing = [k for k in keys if k not in words and k not in listed]
    assert not missing, (f"{lesson}: label these in "
                         f"book/reference/labels.json: {missing}")
    # a label listed for a key that the lesson no longer glues is stale
    glued = R.read_glued(nb)
    assert not [k for k in listed if k not in glued], lesson


def test_labels_read_as_words():
    assert set(LABELS) <= {p.stem for p in PAGES}, "labels of unknown pages"
    for lesson, labels in LABELS.items():
        for key, label in labels.items():
            assert label and len(label) <= 80, (lesson, key, label)
            assert not re.search(r"[`$]", label), (lesson, key, label)
            assert "_" not in key or key not in label, (lesson, key)
            assert label.lower() != R.key_label(key).lower(), (lesson, key)
