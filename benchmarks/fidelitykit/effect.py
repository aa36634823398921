"""What an effect is: a unitless ratio the book teaches, declared once."""
from dataclasses import dataclass

DEVICE_ONLY, MIXED = "device-only", "mixed"


@dataclass(frozen=True)
class Effect:
    """One effect: a ratio a lesson teaches, the reference values that give
    a GPU's, the sizes it is measured at, and how `benchmarks/fidelity.py`
    measures it live.

    The GPU's value, and so the way it points (above, below or about 1),
    is ``formula`` over the reference keys ``refs``; those keys are what
    the lesson glues, so the same formula over a stored run's glued values
    gives the model's. Only ``key``, ``title`` and ``cls`` are required: a
    registry of the lessons' central effects can declare one with
    ``refs``, ``formula`` and ``sizes`` alone (no ``refs``: no reference
    yet), and share it with fidelity.py, which also needs ``experiment``
    and ``live``."""

    key: str            # the effect's name, unique in the book
    title: str          # what the ratio compares, in a few words
    cls: str            # DEVICE_ONLY or MIXED
    experiment: str = ""    # the function in EXPERIMENTS that measures it
    live: str = ""      # expression over that experiment's numbers
    refs: tuple = ()    # "lesson/key" of every reference value it uses
    formula: str = ""   # expression over those keys (the part after "/")
    reason: str = ""    # mixed: why the model may point the other way
    gain: bool = False  # device-only speedup: judge the ratio less 1
    sizes: tuple = ()   # names in `sizes.SIZE_SPECS`: here and on the GPU
    lesson: str = ""    # the lesson that teaches it (default: refs[0]'s)

    def __post_init__(self):
        if not self.lesson and self.refs:
            object.__setattr__(self, "lesson", self.refs[0].split("/")[0])
