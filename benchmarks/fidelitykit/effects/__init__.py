"""The effects fidelity.py measures, one module a lesson; importing them
registers their experiments."""
from ..effect import DEVICE_ONLY, MIXED
from . import asynchrony, devices, loops, pinned, streams


def _of(cls, lessons):
    return [e for lesson in lessons for e in lesson.EFFECTS if e.cls == cls]


# The table's order: the device-only effects first, then the mixed ones.
EFFECTS = (_of(DEVICE_ONLY, (pinned, streams, loops))
           + _of(MIXED, (devices, asynchrony, streams, loops, pinned)))
# The sizes (names in SIZE_SPECS) each effect is measured at.
EFFECT_SIZES = {e.key: e.sizes for e in EFFECTS}
