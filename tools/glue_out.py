"""Move a measuring cell's glue lines into a hidden cell of their own,
keeping the reference values they glue current.

    python tools/glue_out.py LESSON CELL_ID FIRST[-LAST] [FIRST[-LAST] ...]

The 1-based line ranges of cell ``CELL_ID`` in ``book/LESSON.ipynb`` move,
in order, into a new code cell tagged ``remove-cell`` right after it, with
the glue outputs the cell holds. The lines must glue (or only compute what
the moved glue lines glue): the measurement stays where it was.

A reference value's state follows the fingerprint of the cell that glues
it (`src.reference.fingerprint`). Moving the glue lines changes no code
the GPU ran: the two cells, put back together, are the cell it ran, line
for line. So for each key that was *current* in a reference, the stored
fingerprint becomes the new cell's, after checking that the measuring
cell's code with the moved lines put back at their places is the code
the reference fingerprinted. A key that was stale or not captured stays
as it was. Execute the lesson afterwards (``tools/execute.py``).
"""
import json
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book"))

from src.reference import store  # noqa: E402


def _lines(spec):
    first, _, last = spec.partition("-")
    return range(int(first), int(last or first) + 1)


def main(lesson, cell_id, *specs):
    path = ROOT / "book" / f"{lesson}.ipynb"
    nb = json.loads(path.read_text())
    index = next(i for i, c in enumerate(nb["cells"])
                 if c.get("id") == cell_id)
    cell = nb["cells"][index]
    old = store._text(cell["source"])
    lines = old.splitlines()
    moved = sorted({n for spec in specs for n in _lines(spec)})
    if not moved or moved[0] < 1 or moved[-1] > len(lines):
        raise SystemExit(f"lines {moved} are not in the cell's "
                         f"{len(lines)} lines")
    glued_before = {k for k, r in store.read_glued(nb).items()
                    if r["index"] == index}
    kept = [ln for n, ln in enumerate(lines, 1) if n not in moved]
    out = [lines[n - 1] for n in moved]
    # The two cells put back together are the old cell, line for line.
    back = list(kept)
    for n in moved:
        back.insert(n - 1, lines[n - 1])
    assert back == lines

    def source(ls):
        text = "\n".join(ls).rstrip("\n")
        return [ln + "\n" for ln in text.split("\n")[:-1]] + \
            [text.split("\n")[-1]]

    glue_outputs = [o for o in cell.get("outputs", [])
                    if o.get("metadata", {}).get("scrapbook")]
    cell["source"] = source(kept)
    cell["outputs"] = [o for o in cell.get("outputs", [])
                       if o not in glue_outputs]
    new = {"cell_type": "code", "execution_count": None,
           "id": uuid.uuid4().hex[:8], "metadata": {"tags": ["remove-cell"]},
           "outputs": glue_outputs, "source": source(out)}
    nb["cells"].insert(index + 1, new)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")

    old_print = store.fingerprint(old)
    new_print = store.fingerprint(store._text(new["source"]))
    glued_after = {k for k, r in store.read_glued(nb).items()
                   if r["index"] == index + 1}
    if glued_after != glued_before:
        raise SystemExit(f"glued keys moved {sorted(glued_before)} -> "
                         f"{sorted(glued_after)}: run the lesson first")
    for ref in sorted((ROOT / "book" / "reference").glob("*.json")):
        if ref.name == "exclusions.json" or ref.name == "labels.json":
            continue
        data = json.loads(ref.read_text())
        values = data.get("lessons", {}).get(lesson, {}).get("values", {})
        changed = []
        for key in sorted(glued_before):
            entry = values.get(key)
            if entry is not None and entry.get("cell") == old_print:
                entry["cell"] = new_print
                changed.append(key)
        if changed:
            ref.write_text(json.dumps(data, indent=1)
                           + "\n")
        print(f"{ref.name}: {lesson} {', '.join(changed) or 'nothing'} "
              f"now glued by cell {new['id']} ({new_print})")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
