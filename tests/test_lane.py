"""The GPU lane on a lent machine (tools/gpu/): what it may ask of the GPU.

The lent machine's rule: never ask for more managed memory than the device
has free, which can hang it. 02.3's GPU branch, as the lane runs it
(``BOOK_LANE=1``, which tools/gpu/run.sh sets), keeps to it; rehearsed on
the model (tools/gpu/rehearse.py) with a spy on every managed allocation.
"""
import json

import scripts
from src.reference import store, writer

ROOT = scripts.ROOT
LESSON = ROOT / "book" / "02_3_allocators.ipynb"

#: Code run first in a rehearsed copy: every managed allocation, whatever
#: calls it, appends ``[bytes asked for, bytes free]`` to LOG.
SPY = """
import json as _json
from src.cpudevice.cuda import managed as _managed
from src.cpudevice.cuda import runtime as _runtime
_init = _managed.ManagedMemory.__init__


def _spied(self, size, *args, **kwargs):
    with open({log!r}, "a") as _log:
        _log.write(_json.dumps([int(size), int(_runtime.memGetInfo()[0])])
                   + "\\n")
    _init(self, size, *args, **kwargs)


_managed.ManagedMemory.__init__ = _spied
"""


def rehearse_02_3(tmp_path, lane):
    """Rehearse 02.3's GPU branch with or without the lane's setting;
    return ``(errors, asked, nb)``: its unexpected errors, the managed
    allocations ``[(bytes, free bytes)]`` and the executed copy."""
    rehearse = scripts.load("tools/gpu/rehearse.py")
    log, out = tmp_path / "managed.jsonl", tmp_path / "out"
    out.mkdir()
    errors, _ = rehearse.rehearse(LESSON, out, timeout=300, lane=lane,
                                  setup=SPY.format(log=str(log)))
    asked = [tuple(json.loads(line)) for line in
             log.read_text().splitlines()] if log.exists() else []
    nb = json.loads((out / LESSON.name).read_text())
    return errors, asked, nb


def oversubscribed_keys(nb):
    """The keys the cell that glues the managed-memory case's numbers
    glues (the one that glues ``managed_ms``), read from ``nb``."""
    glued = store.read_glued(nb)
    cell = glued["managed_ms"]["index"]
    return {k for k, r in glued.items()
            if r["index"] == cell and not k.endswith(store.REF_SUFFIX)}


def test_02_3_on_the_lane_asks_for_no_more_managed_memory_than_is_free(
        tmp_path):
    errors, asked, nb = rehearse_02_3(tmp_path, lane=True)
    assert errors == []
    assert asked, "the lane's run allocated no managed memory"
    assert all(size <= free for size, free in asked), asked
    # and it glues none of the oversubscribed case's numbers nor keeps its
    # figure (the reference keeps a GPU's that ran it as written), but
    # everything else the lesson measures
    stored = json.loads(LESSON.read_text())
    skipped = oversubscribed_keys(stored)
    assert {"managed_ms", "big_mib", "room_mib"} <= skipped
    glued = {k for k in store.read_glued(nb)
             if not k.endswith(store.REF_SUFFIX)}
    assert not glued & skipped
    assert set(store.read_glued(stored)) - skipped - glued <= {
        k for k in store.read_glued(stored) if k.endswith(store.REF_SUFFIX)}
    assert len(writer.figures(nb)) == len(writer.figures(stored)) - 1
    assert "BOOK_LANE=1: the data is" in json.dumps(nb)


def test_02_3_off_the_lane_oversubscribes_as_the_spy_sees(tmp_path):
    """The control: without the lane's setting the GPU branch asks for 1.5
    times the free memory, and the spy above sees it."""
    errors, asked, nb = rehearse_02_3(tmp_path, lane=False)
    assert errors == []
    assert any(size > free for size, free in asked), asked
    assert oversubscribed_keys(nb) == oversubscribed_keys(
        json.loads(LESSON.read_text()))
