"""Where refresh-reference.sh keeps a GPU's own run of fidelity.py.

    python tools/gpu/fidelity_dest.py OUT BENCHMARKS [IMPORT ARGS ...]

Prints ``BENCHMARKS/fidelity-gpu-<slug>.json``: one file a device, the slug
of the device that ran ``OUT/fidelity-gpu.json`` (``OUT/run.json``'s
device, as the lessons' import names it, else the run's own; ``--device
SLUG`` among the import's arguments wins, as it does for the import).
Refused (exit status 1, the reason on stderr) for a run on the CPU device
model, or where that file holds another device's run.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "book"))
from src.reference import device_slug  # noqa: E402


def device_option(args):
    """The value of ``--device SLUG`` (or ``--device=SLUG``) in ``args``."""
    for i, arg in enumerate(args):
        if arg.startswith("--device="):
            return arg.split("=", 1)[1]
        if arg == "--device" and i + 1 < len(args):
            return args[i + 1]
    return None


def destination(out, benchmarks, args=()):
    """The file to copy ``out``'s fidelity-gpu.json to (see above)."""
    out, benchmarks = Path(out), Path(benchmarks)
    run = json.loads((out / "fidelity-gpu.json").read_text())
    if run.get("backend") != "gpu":
        raise SystemExit(f"{out / 'fidelity-gpu.json'} ran on the "
                         f"{run.get('backend')} backend, not a GPU: not "
                         "copied")
    ran = (run.get("devices") or [None])[0]
    info = out / "run.json"
    name = (json.loads(info.read_text()).get("device", {}).get("name")
            if info.is_file() else None) or ran
    slug = device_option(list(args)) or (device_slug(name) if name else None)
    if not slug:
        raise SystemExit("neither run.json nor fidelity-gpu.json names the "
                         "device: pass --device SLUG")
    dest = benchmarks / f"fidelity-gpu-{slug}.json"
    if dest.is_file():
        was = (json.loads(dest.read_text()).get("devices") or [None])[0]
        if was != ran:
            raise SystemExit(f"{dest.name} holds a run of {was}, not of "
                             f"{ran}: not overwritten")
    return dest


if __name__ == "__main__":
    print(destination(sys.argv[1], sys.argv[2], sys.argv[3:]))
