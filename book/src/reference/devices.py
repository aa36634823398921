"""The book's reference devices: their order, their slugs and their facts.

`store.reference_devices` reads the order (``book/reference/devices``);
this module changes it (`set_reference_devices`, `set_default_device`),
names a device's reference file from its name (`device_slug`), reads
what prose says of a device that no run measures (`device_facts`), and
says which device the CPU device model is compared with
(`comparator_device`). The book's folders are read from
`src.reference.store` when a function runs.
"""
import json
import re
from pathlib import Path

from . import store
from .store import reference_devices, reference_path


#: Words of a device's name that its slug leaves out: memory size and
#: kind, the SXM form factor (the plain card of a model: "NVIDIA H100 80GB
#: HBM3", "NVIDIA H200") and filler. Other form factors stay ("pcie",
#: "nvl"): their memory and clocks differ from the SXM card's, so their
#: runs are filed apart.
_DROP = re.compile(r"^(\d+gb|hbm\w*|sxm\d*|tensor|core|gpu)$")


def device_slug(name):
    """The file name of a device's reference, from its name: vendor, model
    and any form factor other than SXM, without memory size or kind
    (``NVIDIA H100 80GB HBM3``: ``nvidia-h100``; ``NVIDIA H100 PCIe``:
    ``nvidia-h100-pcie``; ``NVIDIA H200 NVL``: ``nvidia-h200-nvl``)."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    kept = [w for w in words if not _DROP.match(w)] or words
    return "-".join(kept) or "unknown"


def set_reference_devices(slugs, root=None):
    """Write the order of the reference devices; refused (ValueError) for
    a slug that ``root`` (`REFERENCE_DIR`) holds no ``slug.json`` of, or
    none. Clears the book's execution cache (`clear_execution_cache`).
    Returns the file written."""
    slugs = list(dict.fromkeys(slugs))
    if not slugs:
        raise ValueError("name at least one reference device")
    for slug in slugs:
        if not slug or "/" in slug or not reference_path(slug,
                                                         root).is_file():
            raise ValueError(
                f"no reference {reference_path(slug or '?', root)}: store "
                "one first (python -m src.reference import, or capture)")
    path = Path(root or store.REFERENCE_DIR) / store.DEFAULT_FILE
    path.write_text("".join(f"{s}\n" for s in slugs))
    clear_execution_cache(root)
    return path


def set_default_device(slug, root=None):
    """Make ``slug`` the book's first reference device, the others kept
    after it in their order; refused (ValueError) when ``root``
    (`REFERENCE_DIR`) holds no ``slug.json``. The lessons show it once
    they are executed again. Returns the file written."""
    if not slug or "/" in slug or not reference_path(slug, root).is_file():
        raise ValueError(
            f"no reference {reference_path(slug or '?', root)}: store one "
            "first (python -m src.reference import, or capture)")
    others = [s for s in reference_devices(root) if s != slug
              and reference_path(s, root).is_file()]
    return set_reference_devices([slug, *others], root)


#: Where Jupyter Book keeps its execution cache (`execute_notebooks:
#: cache`), relative to the project root.
EXECUTION_CACHE = Path("_build") / ".jupyter_cache"


def clear_execution_cache(root=None):
    """Remove the execution cache of the book whose references are in
    ``root`` (`REFERENCE_DIR`: ``book/reference``, two folders below the
    project). The cache keys a notebook on its code cells alone, so after
    a new capture or a new order of reference devices it would serve
    outputs glued from the old reference. Returns whether there was
    one."""
    import shutil
    project = Path(root or store.REFERENCE_DIR).resolve().parents[1]
    path = project / EXECUTION_CACHE
    if not path.exists():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return True


def comparator_device():
    """The slug of the reference device the CPU device model is compared
    with: the one its profile was measured on (the profile in use,
    ``BOOK_CPU_PROFILE`` or the default, the H100's), whatever the order
    of `reference_devices`. `benchmarks/lessoneffects.py`, fidelity and
    calibration compare the model with this device's runs: another GPU's
    numbers would test the profile against hardware it does not model."""
    from ..cpudevice._profile import Profile
    data = Profile.load().data
    return device_slug(data.get("device", data["name"]))


def device_facts(slug, root=None):
    """The published facts of reference device ``slug`` from
    ``device-facts.json`` in ``root`` (`REFERENCE_DIR`): ``name``,
    ``bandwidth_tbps``, ``memory_gb``, ``link`` and their ``source``
    (an empty dict for a device the table lacks)."""
    path = Path(root or store.REFERENCE_DIR) / store.FACTS.name
    if not path.exists():
        path = store.FACTS
    if not path.exists():
        return {}
    facts = json.loads(path.read_text())
    return dict(facts.get(slug, {})) if not slug.startswith("_") else {}
