"""Pages a reader finishes: no lesson page carries more than
`MAX_WORDS` words of prose, its paragraphs and list items (issue 31).

Counted on each lesson's markdown as the page shows it: headings, tables,
code blocks, displayed math and the exercises' hidden solutions are not
prose; a glued value is one word, a link its text. d2l's sections run
1,100 to 1,900 words, NVIDIA's hub notebooks 850 to 1,300. A chapter over
the limit is split into sections (`sections:` in ``_toc.yml``, as chapter
5 is); `NOT_YET_SPLIT` names the chapters still waiting for theirs.
"""
import json
import re
from pathlib import Path

import pytest

from src.reference.prose import as_book

BOOK = Path(__file__).resolve().parents[1] / "book"
LESSONS = sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.ipynb"))
MAX_WORDS = 2500
#: Lessons over the limit that are yet to be split into sections: remove
#: each when its chapter is split. Any other lesson over the limit fails.
NOT_YET_SPLIT = set()

_GLUE = re.compile(r"\{glue(?::\w+)?\}`[^`]*`")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_ROLE = re.compile(r"\{\w+(?::\w+)?\}`([^`<]*)(?:<[^`]*>)?`")


def prose(markdown):
    """The paragraphs and list items of a markdown cell, as text."""
    kept, fence, hidden, math = [], None, 0, False
    for line in markdown.splitlines():
        bare = line.strip()
        if fence:
            if bare.startswith(fence):
                fence = None
            continue
        if bare.startswith("```") or bare.startswith("~~~"):
            fence = bare[:3]
            continue
        if bare.startswith("$$"):
            math = not (math or bare.endswith("$$") and len(bare) > 2)
            continue
        if math:
            continue
        if re.match(r"^:::+\s*\{dropdown\}", bare):
            hidden += 1
            continue
        if re.match(r"^:::+\s*\{", bare):
            continue                    # another directive's fence: keep
        if re.match(r"^:::+$", bare):   # its body; close what is open
            hidden = max(0, hidden - 1)
            continue
        if hidden or bare.startswith(("#", "|", "%")):
            continue                    # "%": a MyST comment
        kept.append(line)
    return "\n".join(kept)


def words(text):
    """Words of prose: a glued value is one word, a link its text."""
    text = _GLUE.sub(" N ", text)
    text = _LINK.sub(r"\1", text)
    text = _ROLE.sub(r"\1", text)
    return len(re.findall(r"[^\s*_`|>-]+", text))


def prose_words(nb):
    return sum(words(prose("".join(c["source"]))) for c in nb["cells"]
               if c["cell_type"] == "markdown")


def test_the_counter_counts_paragraphs_and_list_items_only():
    cell = ("## Heading words\n\nTwo words, {glue:text}`x_ms:.2f` ms and "
            "[a link](05_streams.md).\n\n* one item\n\n| a | b |\n|---|---|\n"
            "```python\nprint(1)\n```\n$$\nx = 1\n$$\n:::{dropdown} Solution"
            "\nhidden words here\n:::\nlast")
    assert words(prose(cell)) == len("Two words, N ms and a link. one item "
                                     "last".split())


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_lesson_page_has_at_most_2500_words_of_prose(lesson):
    count = prose_words(as_book(json.loads(
        (BOOK / f"{lesson}.ipynb").read_text())))
    if lesson in NOT_YET_SPLIT:
        if count <= MAX_WORDS:
            pytest.fail(f"{lesson}: {count} words; take it out of "
                        "NOT_YET_SPLIT")
        pytest.skip(f"{lesson}: {count} words, to be split into sections")
    assert count <= MAX_WORDS, (
        f"{lesson}: {count} words of prose, over {MAX_WORDS}: split it "
        "into sections, as chapter 5 is")
